//! Label and field selector parsing must never panic, and whatever parses must print in a form
//! that parses back to the same selector (the API hands printed selectors to other components).
#![no_main]

use bus_schemas::selector::{FieldSelector, Selector};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(selector) = Selector::parse(text) {
        let printed = selector.to_string();
        match Selector::parse(&printed) {
            Ok(again) => assert_eq!(again, selector, "{text:?} printed as {printed:?}"),
            Err(e) => panic!("{text:?} printed as {printed:?}, which does not parse: {e}"),
        }
    }
    if let Ok(selector) = FieldSelector::parse(text) {
        let printed = selector.to_string();
        match FieldSelector::parse(&printed) {
            Ok(again) => assert_eq!(again, selector, "{text:?} printed as {printed:?}"),
            Err(e) => panic!("{text:?} printed as {printed:?}, which does not parse: {e}"),
        }
    }
});
