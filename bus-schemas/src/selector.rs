//! Label and field selectors. PLACEHOLDER: being written by a helper.
