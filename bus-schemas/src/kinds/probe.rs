//! Probes: how the node agent decides a container is alive, ready or started.

use serde::{Deserialize, Serialize};

use super::common::{
    at_least, forbidden, invalid_value, not_supported, required_msg, validate_port_number,
};
use super::intstr::IntOrString;
use crate::status::Cause;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Probe {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<ExecAction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_get: Option<HttpGetAction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_socket: Option<TcpSocketAction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc: Option<GrpcAction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_delay_seconds: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_seconds: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_threshold: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_threshold: Option<i32>,
    /// Overrides the pod's grace period when this probe kills the container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period_seconds: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecAction {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpGetAction {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
    #[serde(default)]
    pub port: IntOrString,
    /// Defaults to the pod IP.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub host: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub scheme: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub http_headers: Vec<HttpHeader>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpHeader {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub value: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TcpSocketAction {
    #[serde(default)]
    pub port: IntOrString,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub host: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrpcAction {
    #[serde(default)]
    pub port: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
}

impl HttpGetAction {
    /// Port, scheme and header names; shared by probes and lifecycle hooks.
    pub(crate) fn validate(&self, path: &str) -> Vec<Cause> {
        let mut causes = self.port.validate_port(&format!("{path}.port"));
        if !self.scheme.is_empty() {
            causes.extend(not_supported(
                &format!("{path}.scheme"),
                &self.scheme,
                &["HTTP", "HTTPS"],
            ));
        }
        for (i, header) in self.http_headers.iter().enumerate() {
            let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
            if header.name.is_empty() || !header.name.bytes().all(token) {
                let at = format!("{path}.httpHeaders[{i}].name");
                causes.push(invalid_value(
                    &at,
                    &header.name,
                    "a valid HTTP header must consist of alphanumeric characters or '-'",
                ));
            }
        }
        causes
    }
}

/// Which probe is validated: the rules differ slightly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeKind {
    Liveness,
    Readiness,
    Startup,
}

/// Kubernetes writes probe numbers as plain ints where 0 means "unset", so a manifest's
/// explicit `periodSeconds: 0` gets the default too.
fn default_if_unset(field: &mut Option<i32>, value: i32) {
    if field.is_none_or(|v| v == 0) {
        *field = Some(value);
    }
}

impl Probe {
    pub fn apply_defaults(&mut self) {
        default_if_unset(&mut self.timeout_seconds, 1);
        default_if_unset(&mut self.period_seconds, 10);
        default_if_unset(&mut self.success_threshold, 1);
        default_if_unset(&mut self.failure_threshold, 3);
        if let Some(get) = &mut self.http_get {
            if get.path.is_empty() {
                get.path = "/".into();
            }
            if get.scheme.is_empty() {
                get.scheme = "HTTP".into();
            }
        }
    }

    pub fn validate(&self, path: &str, kind: ProbeKind) -> Vec<Cause> {
        let mut causes = self.validate_handler(path);
        let numbers = [
            ("initialDelaySeconds", self.initial_delay_seconds, 0),
            ("timeoutSeconds", self.timeout_seconds, 1),
            ("periodSeconds", self.period_seconds, 1),
            ("successThreshold", self.success_threshold, 1),
            ("failureThreshold", self.failure_threshold, 1),
        ];
        for (field, value, min) in numbers {
            if let Some(v) = value {
                causes.extend(at_least(v, min, &format!("{path}.{field}")));
            }
        }
        if kind != ProbeKind::Readiness && self.success_threshold.is_some_and(|v| v != 1) {
            let at = format!("{path}.successThreshold");
            causes.push(invalid_value(
                &at,
                self.success_threshold.unwrap_or(0),
                "must be 1",
            ));
        }
        if let Some(grace) = self.termination_grace_period_seconds {
            let at = format!("{path}.terminationGracePeriodSeconds");
            if kind == ProbeKind::Readiness {
                causes.push(forbidden(&at, "may not be set for readiness probes"));
            } else if grace <= 0 {
                causes.push(invalid_value(&at, grace, "must be greater than 0"));
            }
        }
        causes
    }

    fn validate_handler(&self, path: &str) -> Vec<Cause> {
        let mut causes = Vec::new();
        let mut handlers = 0;
        if let Some(exec) = &self.exec {
            handlers += 1;
            if exec.command.is_empty() {
                causes.push(Cause::required(format!("{path}.exec.command")));
            }
        }
        if let Some(get) = &self.http_get {
            handlers += 1;
            if handlers > 1 {
                causes.push(forbidden(
                    &format!("{path}.httpGet"),
                    "may not specify more than 1 handler type",
                ));
            }
            causes.extend(get.validate(&format!("{path}.httpGet")));
        }
        if let Some(tcp) = &self.tcp_socket {
            handlers += 1;
            if handlers > 1 {
                causes.push(forbidden(
                    &format!("{path}.tcpSocket"),
                    "may not specify more than 1 handler type",
                ));
            }
            causes.extend(tcp.port.validate_port(&format!("{path}.tcpSocket.port")));
        }
        if let Some(grpc) = &self.grpc {
            handlers += 1;
            if handlers > 1 {
                causes.push(forbidden(
                    &format!("{path}.grpc"),
                    "may not specify more than 1 handler type",
                ));
            }
            causes.extend(validate_port_number(
                grpc.port,
                &format!("{path}.grpc.port"),
            ));
        }
        if handlers == 0 {
            causes.push(required_msg(path, "must specify a handler type"));
        }
        causes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(port: IntOrString) -> Probe {
        Probe {
            http_get: Some(HttpGetAction {
                port,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn defaults_fill_unset_numbers_and_zeroes() {
        let mut probe = http(8080.into());
        probe.period_seconds = Some(0);
        probe.failure_threshold = Some(5);
        probe.apply_defaults();
        assert_eq!(probe.timeout_seconds, Some(1));
        assert_eq!(probe.period_seconds, Some(10));
        assert_eq!(probe.success_threshold, Some(1));
        assert_eq!(probe.failure_threshold, Some(5));
        let get = probe.http_get.as_ref().unwrap();
        assert_eq!((get.path.as_str(), get.scheme.as_str()), ("/", "HTTP"));
        let once = probe.clone();
        probe.apply_defaults();
        assert_eq!(probe, once);
    }

    #[test]
    fn exactly_one_handler() {
        let none = Probe::default().validate("p", ProbeKind::Liveness);
        assert_eq!(none[0].field, "p");
        assert_eq!(none[0].reason, "FieldValueRequired");
        let mut two = http("http".into());
        two.tcp_socket = Some(TcpSocketAction {
            port: 80.into(),
            host: String::new(),
        });
        let causes = two.validate("p", ProbeKind::Liveness);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "p.tcpSocket");
    }

    #[test]
    fn numbers_and_kind_rules() {
        let mut probe = http(80.into());
        probe.initial_delay_seconds = Some(-1);
        probe.failure_threshold = Some(0);
        probe.success_threshold = Some(2);
        probe.termination_grace_period_seconds = Some(5);
        let fields: Vec<String> = probe
            .validate("p", ProbeKind::Readiness)
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(
            fields,
            [
                "p.initialDelaySeconds",
                "p.failureThreshold",
                "p.terminationGracePeriodSeconds"
            ]
        );
        let fields: Vec<String> = probe
            .validate("p", ProbeKind::Liveness)
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(
            fields,
            [
                "p.initialDelaySeconds",
                "p.failureThreshold",
                "p.successThreshold"
            ]
        );
    }
}
