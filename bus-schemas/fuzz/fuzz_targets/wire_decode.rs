//! Anything arriving on the bus or at the API is untrusted bytes: decoding a Pod from them,
//! strictly or tolerantly, may fail but must never panic.
#![no_main]

use bus_schemas::codec::{from_msgpack, from_msgpack_strict};
use bus_schemas::kinds::Pod;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = from_msgpack_strict::<Pod>(data);
    let _ = from_msgpack::<Pod>(data);
});
