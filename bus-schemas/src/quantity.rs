//! Resource quantities. PLACEHOLDER: being written by a helper.
