//! IntOrString: ports and rollout budgets that manifests write as a number or as text.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::common::{iana_svc_name, invalid_value};
use crate::status::Cause;

/// Kubernetes' IntOrString. Untagged, so manifests write `8080`, `"http"` or `"25%"` as is.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum IntOrString {
    Int(i32),
    String(String),
}

impl Default for IntOrString {
    fn default() -> Self {
        IntOrString::Int(0)
    }
}

impl From<i32> for IntOrString {
    fn from(v: i32) -> Self {
        IntOrString::Int(v)
    }
}

impl From<&str> for IntOrString {
    fn from(v: &str) -> Self {
        IntOrString::String(v.to_string())
    }
}

impl fmt::Display for IntOrString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IntOrString::Int(v) => write!(f, "{v}"),
            IntOrString::String(s) => f.write_str(s),
        }
    }
}

impl IntOrString {
    /// `0` or `""`: what Kubernetes treats as "not set" (e.g. a Service's targetPort).
    pub fn is_zero(&self) -> bool {
        match self {
            IntOrString::Int(v) => *v == 0,
            IntOrString::String(s) => s.is_empty(),
        }
    }

    pub fn as_int(&self) -> Option<i32> {
        match self {
            IntOrString::Int(v) => Some(*v),
            IntOrString::String(_) => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            IntOrString::Int(_) => None,
            IntOrString::String(s) => Some(s),
        }
    }

    /// The N of a `"N%"` value.
    pub fn percent(&self) -> Option<i32> {
        let digits = self.as_str()?.strip_suffix('%')?;
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok()
    }

    /// Resolves against `total` as Kubernetes' GetScaledValueFromIntOrPercent: a number is
    /// itself, `"N%"` is N% of `total` rounded up (maxSurge) or down (maxUnavailable).
    pub fn scaled_value(&self, total: i32, round_up: bool) -> Result<i32, String> {
        match self {
            IntOrString::Int(v) => Ok(*v),
            IntOrString::String(s) => {
                let pct = self.percent().ok_or_else(|| {
                    format!("invalid value {s:?}: must be an integer or a percentage")
                })?;
                let product = i64::from(pct) * i64::from(total);
                let scaled = if round_up {
                    (product + 99).div_euclid(100)
                } else {
                    product.div_euclid(100)
                };
                i32::try_from(scaled).map_err(|_| format!("{s} of {total} overflows"))
            }
        }
    }

    /// Validates a port given by number (1-65535) or by name (an IANA service name).
    pub fn validate_port(&self, path: &str) -> Vec<Cause> {
        match self {
            IntOrString::Int(v) => super::common::validate_port_number(*v, path)
                .into_iter()
                .collect(),
            IntOrString::String(s) if s.is_empty() => vec![Cause::required(path)],
            IntOrString::String(s) => match iana_svc_name(s) {
                Ok(()) => Vec::new(),
                Err(e) => vec![invalid_value(path, s, &e)],
            },
        }
    }

    /// Validates a non-negative count or a percentage, optionally capped at 100%.
    pub fn validate_int_or_percent(&self, path: &str, at_most_100_percent: bool) -> Vec<Cause> {
        match self {
            IntOrString::Int(v) if *v < 0 => {
                vec![invalid_value(path, v, "must be greater than or equal to 0")]
            }
            IntOrString::Int(_) => Vec::new(),
            IntOrString::String(s) => match self.percent() {
                None => vec![invalid_value(path, s, "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%')")],
                Some(p) if at_most_100_percent && p > 100 => {
                    vec![invalid_value(path, s, "must not be greater than 100%")]
                }
                Some(_) => Vec::new(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_scale_like_kubernetes() {
        let pct = IntOrString::from("25%");
        assert_eq!(pct.scaled_value(10, true), Ok(3));
        assert_eq!(pct.scaled_value(10, false), Ok(2));
        assert_eq!(pct.scaled_value(0, true), Ok(0));
        assert_eq!(IntOrString::Int(4).scaled_value(10, false), Ok(4));
        assert!(IntOrString::from("x%").scaled_value(10, true).is_err());
        assert!(IntOrString::from("25").scaled_value(10, true).is_err());
        assert_eq!(IntOrString::from("100%").percent(), Some(100));
    }

    #[test]
    fn encodes_untagged() {
        assert_eq!(
            serde_json::to_value(IntOrString::Int(80)).ok(),
            Some(serde_json::json!(80))
        );
        let parsed: IntOrString = serde_json::from_value(serde_json::json!("http")).unwrap();
        assert_eq!(parsed, IntOrString::from("http"));
        let bytes = crate::codec::to_msgpack(&IntOrString::from("25%")).unwrap();
        assert_eq!(
            crate::codec::from_msgpack::<IntOrString>(&bytes).unwrap(),
            "25%".into()
        );
        let bytes = crate::codec::to_msgpack(&IntOrString::Int(8080)).unwrap();
        assert_eq!(
            crate::codec::from_msgpack::<IntOrString>(&bytes).unwrap(),
            8080.into()
        );
    }

    #[test]
    fn validates_ports_and_percentages() {
        assert!(IntOrString::Int(80).validate_port("p").is_empty());
        assert_eq!(IntOrString::Int(0).validate_port("p")[0].field, "p");
        assert!(IntOrString::from("http").validate_port("p").is_empty());
        assert!(!IntOrString::from("HTTP").validate_port("p").is_empty());
        assert!(IntOrString::from("50%")
            .validate_int_or_percent("p", true)
            .is_empty());
        assert!(!IntOrString::from("150%")
            .validate_int_or_percent("p", true)
            .is_empty());
        assert!(IntOrString::from("150%")
            .validate_int_or_percent("p", false)
            .is_empty());
        assert!(!IntOrString::Int(-1)
            .validate_int_or_percent("p", false)
            .is_empty());
    }
}
