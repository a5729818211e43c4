//! Resource quantities. INTERFACE STUB: the implementation is being written by a helper.

use serde::{Deserialize, Serialize};

/// An exact resource quantity (`100m`, `0.5`, `2`, `128Mi`, `1G`, `1e3`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Quantity {
    /// Value in thousandths (milli-units), rounded up where the input is finer.
    milli: i128,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("quantity {input:?} is invalid: {why}")]
pub struct QuantityError {
    pub input: String,
    pub why: String,
}

impl Quantity {
    pub fn parse(_input: &str) -> Result<Quantity, QuantityError> {
        todo!()
    }
    pub fn from_milli(milli: i128) -> Quantity {
        Quantity { milli }
    }
    pub fn milli_value(&self) -> i128 {
        self.milli
    }
    /// Whole units, rounded up (bytes for memory, cores for cpu).
    pub fn value(&self) -> i128 {
        todo!()
    }
}

impl std::fmt::Display for Quantity {
    fn fmt(&self, _f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        todo!()
    }
}

impl Serialize for Quantity {
    fn serialize<S: serde::Serializer>(&self, _s: S) -> Result<S::Ok, S::Error> {
        todo!()
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: serde::Deserializer<'de>>(_d: D) -> Result<Self, D::Error> {
        todo!()
    }
}
