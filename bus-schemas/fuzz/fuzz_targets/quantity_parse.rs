//! Quantity parsing must never panic, and a parsed quantity must print in a form that parses
//! back to the same value, and prints the same way again.
#![no_main]

use bus_schemas::quantity::Quantity;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(quantity) = Quantity::parse(text) else {
        return;
    };
    let printed = quantity.to_string();
    match Quantity::parse(&printed) {
        Ok(again) => {
            assert_eq!(again, quantity, "{text:?} printed as {printed:?}");
            assert_eq!(
                again.to_string(),
                printed,
                "{text:?}: printing is not stable"
            );
        }
        Err(e) => panic!("{text:?} printed as {printed:?}, which does not parse: {e}"),
    }
    // Rounding must never make a value disagree in sign with its milli count.
    let value = quantity.value();
    assert_eq!(value.signum(), quantity.milli_value().signum(), "{text:?}");
});
