//! Label and field selectors: the Kubernetes grammar, one implementation used everywhere.
//!
//! A [`Selector`] is a list of [`Requirement`]s joined by AND. It is built by parsing the string
//! grammar (`app=web,tier in (front,back),!canary`), from a structured [`LabelSelector`], or from
//! requirements directly (node affinity uses the `Gt`/`Lt` operators that the string grammar
//! lacks). Requirements are kept sorted, so equal selectors compare equal and print identically.
//!
//! As in Kubernetes, `!=` and `notin` also match objects that lack the key.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::status::Cause;
use crate::validation::{label_key, label_value};

/// The structured selector objects carry (`matchLabels` + `matchExpressions`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct LabelSelectorRequirement {
    pub key: String,
    /// In, NotIn, Exists, DoesNotExist.
    pub operator: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// The operators a `LabelSelector` expression may use, in their API spelling.
const LABEL_SELECTOR_OPERATORS: [&str; 4] = ["In", "NotIn", "Exists", "DoesNotExist"];

impl LabelSelector {
    /// Validates, naming fields under `path` (e.g. `spec.selector`).
    pub fn validate(&self, path: &str) -> Vec<Cause> {
        let mut causes = Vec::new();
        let labels_path = format!("{path}.matchLabels");
        for (key, value) in &self.match_labels {
            if let Err(e) = label_key(key) {
                causes.push(Cause::invalid(
                    &labels_path,
                    format!("Invalid value: {key:?}: {e}"),
                ));
            }
            if let Err(e) = label_value(value) {
                causes.push(Cause::invalid(
                    &labels_path,
                    format!("Invalid value: {value:?}: {e}"),
                ));
            }
        }
        for (i, expr) in self.match_expressions.iter().enumerate() {
            let at = format!("{path}.matchExpressions[{i}]");
            if let Err(e) = label_key(&expr.key) {
                causes.push(Cause::invalid(
                    format!("{at}.key"),
                    format!("Invalid value: {:?}: {e}", expr.key),
                ));
            }
            match expr.operator.as_str() {
                "In" | "NotIn" if expr.values.is_empty() => causes.push(Cause::new(
                    "FieldValueRequired",
                    format!("{at}.values"),
                    "must be specified when `operator` is 'In' or 'NotIn'",
                )),
                "Exists" | "DoesNotExist" if !expr.values.is_empty() => {
                    causes.push(Cause::invalid(
                        format!("{at}.values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    ))
                }
                "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
                other => causes.push(Cause::not_supported(
                    format!("{at}.operator"),
                    other,
                    &LABEL_SELECTOR_OPERATORS,
                )),
            }
            for (j, value) in expr.values.iter().enumerate() {
                if let Err(e) = label_value(value) {
                    causes.push(Cause::invalid(
                        format!("{at}.values[{j}]"),
                        format!("Invalid value: {value:?}: {e}"),
                    ));
                }
            }
        }
        causes
    }

    /// Converts to a [`Selector`]; an empty `LabelSelector` selects everything.
    pub fn to_selector(&self) -> Result<Selector, SelectorError> {
        let mut requirements = Vec::with_capacity(self.match_labels.len());
        for (key, value) in &self.match_labels {
            requirements.push(Requirement::new(
                key.clone(),
                Operator::Equals,
                [value.clone()],
            )?);
        }
        for (i, expr) in self.match_expressions.iter().enumerate() {
            let operator = match expr.operator.as_str() {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => {
                    return Err(SelectorError {
                        input: expr.key.clone(),
                        position: 0,
                        why: format!(
                            "matchExpressions[{i}].operator {other:?} is not supported: \
                             supported values: {}",
                            LABEL_SELECTOR_OPERATORS.join(", ")
                        ),
                    })
                }
            };
            requirements.push(Requirement::new(
                expr.key.clone(),
                operator,
                expr.values.iter().cloned(),
            )?);
        }
        Ok(Selector::from_requirements(requirements))
    }

    /// Whether `labels` satisfy the selector. An invalid selector matches nothing, so a bad
    /// selector can never widen what a controller adopts or deletes.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.to_selector().is_ok_and(|s| s.matches(labels))
    }

    /// No labels and no expressions: Kubernetes reads this as "select everything".
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }
}

/// How a requirement compares a label with its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operator {
    /// `key=value` or `key==value`: the key is present with this value.
    Equals,
    /// `key!=value`: the key is absent, or present with another value.
    NotEquals,
    /// `key in (a,b)`: the key is present with one of the values.
    In,
    /// `key notin (a,b)`: the key is absent, or present with none of the values.
    NotIn,
    /// `key`: the key is present.
    Exists,
    /// `!key`: the key is absent.
    DoesNotExist,
    /// The key's value, read as an integer, is greater than the single value (node affinity).
    Gt,
    /// The key's value, read as an integer, is less than the single value (node affinity).
    Lt,
}

impl Operator {
    /// The API spelling used by `matchExpressions` and node selector terms.
    pub fn api_name(self) -> &'static str {
        match self {
            Operator::Equals => "Equals",
            Operator::NotEquals => "NotEquals",
            Operator::In => "In",
            Operator::NotIn => "NotIn",
            Operator::Exists => "Exists",
            Operator::DoesNotExist => "DoesNotExist",
            Operator::Gt => "Gt",
            Operator::Lt => "Lt",
        }
    }

    /// Reads an API spelling (`In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt`, …).
    pub fn from_api_name(name: &str) -> Option<Operator> {
        [
            Operator::Equals,
            Operator::NotEquals,
            Operator::In,
            Operator::NotIn,
            Operator::Exists,
            Operator::DoesNotExist,
            Operator::Gt,
            Operator::Lt,
        ]
        .into_iter()
        .find(|op| op.api_name() == name)
    }
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.api_name())
    }
}

/// One condition on one label key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Requirement {
    pub key: String,
    pub operator: Operator,
    pub values: BTreeSet<String>,
}

impl Requirement {
    /// A validated requirement: the key must be a label key, and the values must suit the
    /// operator (one for `=`/`!=`, at least one for `in`/`notin`, none for `exists`, one
    /// integer for `Gt`/`Lt`), each a valid label value.
    pub fn new<I, V>(
        key: impl Into<String>,
        operator: Operator,
        values: I,
    ) -> Result<Requirement, SelectorError>
    where
        I: IntoIterator<Item = V>,
        V: Into<String>,
    {
        let key = key.into();
        let values: BTreeSet<String> = values.into_iter().map(Into::into).collect();
        let fail = |why: String| SelectorError {
            input: key.clone(),
            position: 0,
            why,
        };
        label_key(&key).map_err(|e| fail(format!("invalid label key {key:?}: {e}")))?;
        let count = values.len();
        match operator {
            Operator::Equals | Operator::NotEquals if count != 1 => {
                return Err(fail(format!(
                    "{operator} needs exactly one value, not {count}"
                )));
            }
            Operator::In | Operator::NotIn if count == 0 => {
                return Err(fail(format!("{operator} needs at least one value")));
            }
            Operator::Exists | Operator::DoesNotExist if count != 0 => {
                return Err(fail(format!("{operator} takes no values")));
            }
            Operator::Gt | Operator::Lt => {
                let mut iter = values.iter();
                match (iter.next(), iter.next()) {
                    (Some(v), None) if v.parse::<i64>().is_ok() => {}
                    (Some(v), None) => {
                        return Err(fail(format!("{operator} needs an integer, not {v:?}")));
                    }
                    _ => {
                        return Err(fail(format!(
                            "{operator} needs exactly one value, not {count}"
                        )));
                    }
                }
            }
            _ => {}
        }
        if !matches!(operator, Operator::Gt | Operator::Lt) {
            for value in &values {
                label_value(value).map_err(|e| {
                    fail(format!(
                        "invalid label value {value:?} for key {key:?}: {e}"
                    ))
                })?;
            }
        }
        Ok(Requirement {
            key,
            operator,
            values,
        })
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let actual = labels.get(&self.key);
        match self.operator {
            Operator::Equals | Operator::In => actual.is_some_and(|v| self.values.contains(v)),
            Operator::NotEquals | Operator::NotIn => {
                actual.is_none_or(|v| !self.values.contains(v))
            }
            Operator::Exists => actual.is_some(),
            Operator::DoesNotExist => actual.is_none(),
            Operator::Gt | Operator::Lt => {
                let (Some(actual), Some(bound)) = (actual, self.single_integer()) else {
                    return false;
                };
                let Ok(actual) = actual.parse::<i64>() else {
                    return false;
                };
                if self.operator == Operator::Gt {
                    actual > bound
                } else {
                    actual < bound
                }
            }
        }
    }

    fn single_integer(&self) -> Option<i64> {
        let mut iter = self.values.iter();
        match (iter.next(), iter.next()) {
            (Some(v), None) => v.parse().ok(),
            _ => None,
        }
    }

    fn first_value(&self) -> &str {
        self.values.iter().next().map_or("", String::as_str)
    }
}

/// The string-grammar form; `Gt`/`Lt` print as `key>1`/`key<1`, as Kubernetes prints them.
impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = &self.key;
        let set = || {
            self.values
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(",")
        };
        match self.operator {
            Operator::Equals => write!(f, "{key}={}", self.first_value()),
            Operator::NotEquals => write!(f, "{key}!={}", self.first_value()),
            Operator::In => write!(f, "{key} in ({})", set()),
            Operator::NotIn => write!(f, "{key} notin ({})", set()),
            Operator::Exists => write!(f, "{key}"),
            Operator::DoesNotExist => write!(f, "!{key}"),
            Operator::Gt => write!(f, "{key}>{}", self.first_value()),
            Operator::Lt => write!(f, "{key}<{}", self.first_value()),
        }
    }
}

/// A parsed label selector: requirements joined by AND.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    /// Sorted and without duplicates, so that equality and printing are canonical.
    requirements: Vec<Requirement>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("selector {input:?} is invalid at {position}: {why}")]
pub struct SelectorError {
    pub input: String,
    pub position: usize,
    pub why: String,
}

impl Selector {
    pub fn parse(input: &str) -> Result<Selector, SelectorError> {
        Parser {
            input,
            tokens: lex(input),
            next: 0,
        }
        .selector()
    }

    pub fn everything() -> Selector {
        Selector::default()
    }

    pub fn is_everything(&self) -> bool {
        self.requirements.is_empty()
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// A selector of exactly these requirements (not re-validated; see [`Requirement::new`]).
    pub fn from_requirements(mut requirements: Vec<Requirement>) -> Selector {
        requirements.sort();
        requirements.dedup();
        Selector { requirements }
    }

    /// `key=value` for every label: what a controller uses to find what it made.
    pub fn from_labels(labels: &BTreeMap<String, String>) -> Selector {
        Selector::from_requirements(
            labels
                .iter()
                .map(|(key, value)| Requirement {
                    key: key.clone(),
                    operator: Operator::Equals,
                    values: BTreeSet::from([value.clone()]),
                })
                .collect(),
        )
    }

    /// The requirements, sorted by key, then operator, then values.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// This selector with one more requirement.
    pub fn and(mut self, requirement: Requirement) -> Selector {
        self.requirements.push(requirement);
        Selector::from_requirements(self.requirements)
    }
}

impl FromStr for Selector {
    type Err = SelectorError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Selector::parse(s)
    }
}

/// The canonical string form; it parses back to an equal selector.
impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, requirement) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{requirement}")?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token<'a> {
    Word(&'a str),
    Equals,
    DoubleEquals,
    NotEquals,
    Bang,
    Open,
    Close,
    Comma,
    Greater,
    Less,
    End,
}

impl fmt::Display for Token<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            Token::Word(word) => return write!(f, "{word:?}"),
            Token::End => return f.write_str("end of input"),
            Token::Equals => "=",
            Token::DoubleEquals => "==",
            Token::NotEquals => "!=",
            Token::Bang => "!",
            Token::Open => "(",
            Token::Close => ")",
            Token::Comma => ",",
            Token::Greater => ">",
            Token::Less => "<",
        };
        write!(f, "{text:?}")
    }
}

/// Whitespace as Kubernetes' lexer sees it.
fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

fn is_symbol(c: char) -> bool {
    matches!(c, '=' | '!' | '(' | ')' | ',' | '<' | '>')
}

/// Splits into tokens with their byte offsets; the list always ends with `End`.
fn lex(input: &str) -> Vec<(usize, Token<'_>)> {
    let mut tokens = Vec::new();
    let mut chars = input.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if is_space(c) {
            continue;
        }
        let followed_by_equals = chars.peek().is_some_and(|&(_, next)| next == '=');
        let token = match c {
            '=' if followed_by_equals => {
                chars.next();
                Token::DoubleEquals
            }
            '!' if followed_by_equals => {
                chars.next();
                Token::NotEquals
            }
            '=' => Token::Equals,
            '!' => Token::Bang,
            '(' => Token::Open,
            ')' => Token::Close,
            ',' => Token::Comma,
            '>' => Token::Greater,
            '<' => Token::Less,
            _ => {
                let mut end = input.len();
                while let Some(&(i, next)) = chars.peek() {
                    if is_space(next) || is_symbol(next) {
                        end = i;
                        break;
                    }
                    chars.next();
                }
                Token::Word(&input[at..end])
            }
        };
        tokens.push((at, token));
    }
    tokens.push((input.len(), Token::End));
    tokens
}

struct Parser<'a> {
    input: &'a str,
    tokens: Vec<(usize, Token<'a>)>,
    next: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> (usize, Token<'a>) {
        // `lex` always ends the list with `End`, and `bump` never moves past it.
        self.tokens
            .get(self.next)
            .copied()
            .unwrap_or((self.input.len(), Token::End))
    }

    fn bump(&mut self) -> (usize, Token<'a>) {
        let token = self.peek();
        if token.1 != Token::End {
            self.next += 1;
        }
        token
    }

    fn error(&self, position: usize, why: String) -> SelectorError {
        SelectorError {
            input: self.input.to_string(),
            position,
            why,
        }
    }

    fn selector(mut self) -> Result<Selector, SelectorError> {
        let mut requirements = Vec::new();
        if self.peek().1 == Token::End {
            return Ok(Selector::everything());
        }
        loop {
            requirements.push(self.requirement()?);
            match self.bump() {
                (_, Token::End) => break,
                (_, Token::Comma) => {
                    if let (at, Token::End) = self.peek() {
                        return Err(
                            self.error(at, "expected a requirement after \",\"".to_string())
                        );
                    }
                }
                (at, token) => {
                    return Err(self.error(
                        at,
                        format!("unexpected {token}: expected \",\" or end of input"),
                    ))
                }
            }
        }
        Ok(Selector::from_requirements(requirements))
    }

    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        let (at, token) = self.bump();
        let (key_at, key, negated) = match token {
            Token::Word(key) => (at, key, false),
            Token::Bang => match self.bump() {
                (key_at, Token::Word(key)) => (key_at, key, true),
                (at, token) => {
                    return Err(self.error(
                        at,
                        format!("unexpected {token}: expected a label key after \"!\""),
                    ))
                }
            },
            token => {
                return Err(self.error(
                    at,
                    format!("unexpected {token}: expected a label key or \"!\""),
                ))
            }
        };
        label_key(key)
            .map_err(|e| self.error(key_at, format!("invalid label key {key:?}: {e}")))?;
        let requirement = |operator, values: Vec<&str>| Requirement {
            key: key.to_string(),
            operator,
            values: values.into_iter().map(str::to_string).collect(),
        };
        if negated {
            return Ok(requirement(Operator::DoesNotExist, vec![]));
        }
        let (at, token) = self.peek();
        let operator = match token {
            Token::End | Token::Comma => return Ok(requirement(Operator::Exists, vec![])),
            Token::Equals | Token::DoubleEquals => Operator::Equals,
            Token::NotEquals => Operator::NotEquals,
            Token::Word("in") => Operator::In,
            Token::Word("notin") => Operator::NotIn,
            Token::Greater => Operator::Gt,
            Token::Less => Operator::Lt,
            token => {
                return Err(self.error(
                    at,
                    format!(
                        "unexpected {token} after key {key:?}: expected \"=\", \"==\", \"!=\", \
                         \"in\", \"notin\", \",\" or end of input"
                    ),
                ))
            }
        };
        self.bump();
        let values = if matches!(operator, Operator::In | Operator::NotIn) {
            self.set(token, key)?
        } else {
            let (value_at, _) = self.peek();
            let value = self.exact_value(token, key)?;
            // Kubernetes reads the bound as a 64-bit integer, and it must also be a valid
            // label value: `x>-1` and `x>+1` are refused, `x>007` is 7.
            if matches!(operator, Operator::Gt | Operator::Lt) && value.parse::<i64>().is_err() {
                return Err(self.error(
                    value_at,
                    format!("{token} needs an integer value, not {value:?}"),
                ));
            }
            vec![value]
        };
        Ok(requirement(operator, values))
    }

    /// The value after `=`, `==` or `!=`; nothing before `,` or the end means the empty value.
    fn exact_value(&mut self, operator: Token<'a>, key: &str) -> Result<&'a str, SelectorError> {
        match self.peek() {
            (_, Token::End | Token::Comma) => Ok(""),
            (at, Token::Word(value)) => {
                self.bump();
                self.check_value(at, key, value)?;
                Ok(value)
            }
            (at, token) => Err(self.error(
                at,
                format!("unexpected {token}: expected a value after {operator}"),
            )),
        }
    }

    /// `(v1,v2)`. As in Kubernetes, an empty slot between commas or parentheses is the empty
    /// value, so `()` is the set holding only "" and `(a,)` holds "a" and "".
    fn set(&mut self, operator: Token<'a>, key: &str) -> Result<Vec<&'a str>, SelectorError> {
        let keyword = match operator {
            Token::Word(word) => word,
            _ => "in",
        };
        match self.bump() {
            (_, Token::Open) => {}
            (at, token) => {
                return Err(self.error(
                    at,
                    format!("expected \"(\" after {keyword:?}, found {token}"),
                ))
            }
        }
        let mut values = Vec::new();
        loop {
            let value = match self.peek() {
                (at, Token::Word(value)) => {
                    self.bump();
                    self.check_value(at, key, value)?;
                    value
                }
                _ => "",
            };
            values.push(value);
            match self.bump() {
                (_, Token::Comma) => {}
                (_, Token::Close) => return Ok(values),
                (at, Token::End) => {
                    return Err(self.error(
                        at,
                        format!(
                            "unexpected end of input: expected \")\" to close the {keyword:?} set"
                        ),
                    ))
                }
                (at, token) => {
                    return Err(
                        self.error(at, format!("unexpected {token}: expected \",\" or \")\""))
                    )
                }
            }
        }
    }

    fn check_value(&self, at: usize, key: &str, value: &str) -> Result<(), SelectorError> {
        label_value(value).map_err(|e| {
            self.error(
                at,
                format!("invalid label value {value:?} for key {key:?}: {e}"),
            )
        })
    }
}

/// One term of a field selector.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FieldRequirement {
    pub field: String,
    /// Only [`Operator::Equals`] or [`Operator::NotEquals`].
    pub operator: Operator,
    pub value: String,
}

impl FieldRequirement {
    pub fn matches(&self, lookup: &dyn Fn(&str) -> Option<String>) -> bool {
        let actual = lookup(&self.field).unwrap_or_default();
        match self.operator {
            Operator::NotEquals => actual != self.value,
            _ => actual == self.value,
        }
    }
}

impl fmt::Display for FieldRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let operator = if self.operator == Operator::NotEquals {
            "!="
        } else {
            "="
        };
        write!(f, "{}{operator}", self.field)?;
        for c in self.value.chars() {
            if matches!(c, '\\' | ',' | '=') {
                f.write_str("\\")?;
            }
            write!(f, "{c}")?;
        }
        Ok(())
    }
}

/// A field selector (`metadata.name=x,spec.nodeName!=`): `=`, `==` and `!=` on named fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    /// Sorted and without duplicates, so that equality and printing are canonical.
    requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// Parses `field=value` terms joined by `,`. In values, `\,`, `\=` and `\\` stand for the
    /// characters themselves, as in Kubernetes; whitespace around fields and values is dropped.
    pub fn parse(input: &str) -> Result<FieldSelector, SelectorError> {
        let fail = |position: usize, why: String| SelectorError {
            input: input.to_string(),
            position,
            why,
        };
        let mut requirements = Vec::new();
        for (start, term) in split_unescaped_commas(input) {
            if term.trim().is_empty() {
                // Kubernetes skips empty terms, so `a=b,` is just `a=b`.
                continue;
            }
            let Some((op_at, operator, op_len)) = find_operator(term) else {
                return Err(fail(
                    start,
                    format!(
                        "{:?} has no operator: expected \"=\", \"==\" or \"!=\"",
                        term.trim()
                    ),
                ));
            };
            let field = term[..op_at].trim();
            let field_at = start + (term.len() - term.trim_start().len());
            if field.is_empty() {
                return Err(fail(
                    start + op_at,
                    "expected a field name before the operator".into(),
                ));
            }
            // `!` is refused too: `a! =x` would otherwise print as `a!=x`, which reads as `!=`.
            if let Some(bad) = field
                .chars()
                .find(|&c| c.is_whitespace() || matches!(c, '\\' | '!'))
            {
                return Err(fail(
                    field_at,
                    format!("field name {field:?} must not contain {bad:?}"),
                ));
            }
            let raw = &term[op_at + op_len..];
            let value_at = start + op_at + op_len + (raw.len() - raw.trim_start().len());
            let value =
                unescape(raw.trim()).map_err(|(offset, why)| fail(value_at + offset, why))?;
            requirements.push(FieldRequirement {
                field: field.to_string(),
                operator,
                value,
            });
        }
        Ok(FieldSelector::from_requirements(requirements))
    }

    pub fn is_everything(&self) -> bool {
        self.requirements.is_empty()
    }

    /// `lookup` returns a field's value as text, or None when the object has no such field.
    pub fn matches(&self, lookup: &dyn Fn(&str) -> Option<String>) -> bool {
        self.requirements.iter().all(|r| r.matches(lookup))
    }

    pub fn everything() -> FieldSelector {
        FieldSelector::default()
    }

    /// A selector of exactly these requirements; operators other than `!=` act as `=`.
    pub fn from_requirements(mut requirements: Vec<FieldRequirement>) -> FieldSelector {
        for r in &mut requirements {
            if r.operator != Operator::NotEquals {
                r.operator = Operator::Equals;
            }
        }
        requirements.sort();
        requirements.dedup();
        FieldSelector { requirements }
    }

    /// The terms, sorted by field, so callers can check the field names they support.
    pub fn requirements(&self) -> &[FieldRequirement] {
        &self.requirements
    }

    /// The value `field` must equal, if the selector pins it (e.g. `spec.nodeName=n1` lets a
    /// node watch only its own pods).
    pub fn requires_exact_match(&self, field: &str) -> Option<&str> {
        self.requirements
            .iter()
            .find(|r| r.field == field && r.operator == Operator::Equals)
            .map(|r| r.value.as_str())
    }
}

impl FromStr for FieldSelector {
    type Err = SelectorError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        FieldSelector::parse(s)
    }
}

/// The canonical string form, with `\`, `,` and `=` escaped in values; it parses back equal.
impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, requirement) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{requirement}")?;
        }
        Ok(())
    }
}

/// Terms with their byte offsets; a backslash protects the character after it.
fn split_unescaped_commas(input: &str) -> Vec<(usize, &str)> {
    let mut terms = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in input.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            ',' => {
                terms.push((start, &input[start..i]));
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push((start, &input[start..]));
    terms
}

/// The first operator in a term, preferring `!=` and `==` over `=` at the same spot, as
/// Kubernetes does. Returns (offset, operator, length).
fn find_operator(term: &str) -> Option<(usize, Operator, usize)> {
    let bytes = term.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            // An escaped `=` belongs to a value, never an operator.
            b'\\' => i += 1,
            b'!' if bytes.get(i + 1) == Some(&b'=') => return Some((i, Operator::NotEquals, 2)),
            b'=' if bytes.get(i + 1) == Some(&b'=') => return Some((i, Operator::Equals, 2)),
            b'=' => return Some((i, Operator::Equals, 1)),
            _ => {}
        }
        i += 1;
    }
    None
}

/// Undoes `\\`, `\,` and `\=`; an unescaped `=` or any other escape is an error (offset, why).
fn unescape(raw: &str) -> Result<String, (usize, String)> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some((_, next @ ('\\' | ',' | '='))) => out.push(next),
                Some((_, next)) => {
                    return Err((
                        i,
                        format!("invalid escape \"\\{next}\": only \\\\, \\, and \\= are allowed"),
                    ))
                }
                None => return Err((i, "a value must not end with a lone \"\\\"".to_string())),
            },
            '=' => return Err((i, "\"=\" in a value must be escaped as \"\\=\"".to_string())),
            c => out.push(c),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn sel(s: &str) -> Selector {
        Selector::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn err(s: &str) -> SelectorError {
        Selector::parse(s).expect_err(s)
    }

    #[test]
    fn empty_selects_everything() {
        for input in ["", " ", "\t\n "] {
            let s = sel(input);
            assert!(s.is_everything());
            assert_eq!(s, Selector::everything());
            assert!(s.matches(&labels(&[])));
            assert!(s.matches(&labels(&[("a", "b")])));
        }
        assert!(Selector::default().is_everything());
        assert_eq!(Selector::everything().to_string(), "");
    }

    #[test]
    fn equality_operators() {
        let web = labels(&[("app", "web"), ("tier", "front")]);
        let db = labels(&[("app", "db")]);
        let none = labels(&[]);
        for input in ["app=web", "app==web", " app = web ", "app == web"] {
            let s = sel(input);
            assert!(s.matches(&web), "{input}");
            assert!(!s.matches(&db), "{input}");
            assert!(!s.matches(&none), "{input}");
        }
        let s = sel("app!=web");
        assert!(!s.matches(&web));
        assert!(s.matches(&db));
        assert!(s.matches(&none), "!= matches objects without the key");
    }

    #[test]
    fn empty_values() {
        let s = sel("app=");
        assert_eq!(s.requirements()[0].values, BTreeSet::from([String::new()]));
        assert!(s.matches(&labels(&[("app", "")])));
        assert!(!s.matches(&labels(&[("app", "x")])));
        assert!(!s.matches(&labels(&[])));
        let s = sel("app!=,tier=front");
        assert!(s.matches(&labels(&[("app", "x"), ("tier", "front")])));
        assert!(!s.matches(&labels(&[("app", ""), ("tier", "front")])));
    }

    #[test]
    fn set_operators() {
        let s = sel("env in (prod, staging)");
        assert!(s.matches(&labels(&[("env", "prod")])));
        assert!(s.matches(&labels(&[("env", "staging")])));
        assert!(!s.matches(&labels(&[("env", "dev")])));
        assert!(!s.matches(&labels(&[])));
        let s = sel("env notin (prod,staging)");
        assert!(!s.matches(&labels(&[("env", "prod")])));
        assert!(s.matches(&labels(&[("env", "dev")])));
        assert!(
            s.matches(&labels(&[])),
            "notin matches objects without the key"
        );
        assert_eq!(sel("env in(a)"), sel("env in (a)"));
        assert_eq!(sel("env in (a,b)"), sel("env in ( b , a )"));
    }

    #[test]
    fn set_empty_slots_follow_kubernetes() {
        let values = |s: &str| sel(s).requirements()[0].values.clone();
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        assert_eq!(values("a in ()"), set(&[""]));
        assert_eq!(values("a in (x,)"), set(&["x", ""]));
        assert_eq!(values("a in (,x)"), set(&["x", ""]));
        assert_eq!(values("a in (x,,y)"), set(&["x", "", "y"]));
        assert_eq!(values("a in (x,x)"), set(&["x"]));
    }

    #[test]
    fn existence_operators() {
        let s = sel("gpu");
        assert!(s.matches(&labels(&[("gpu", "")])));
        assert!(!s.matches(&labels(&[])));
        let s = sel("!gpu");
        assert!(!s.matches(&labels(&[("gpu", "true")])));
        assert!(s.matches(&labels(&[])));
        assert_eq!(sel("! gpu"), sel("!gpu"));
    }

    #[test]
    fn requirements_are_anded() {
        let s = sel("app=web, tier in (front), !canary, region, env!=dev");
        let full = labels(&[("app", "web"), ("tier", "front"), ("region", "eu")]);
        assert!(s.matches(&full));
        let mut canary = full.clone();
        canary.insert("canary".into(), "true".into());
        assert!(!s.matches(&canary));
        let mut dev = full.clone();
        dev.insert("env".into(), "dev".into());
        assert!(!s.matches(&dev));
        let mut no_region = full.clone();
        no_region.remove("region");
        assert!(!s.matches(&no_region));
        assert_eq!(s.requirements().len(), 5);
    }

    #[test]
    fn keywords_are_keys_and_values_by_position() {
        let s = sel("in in (notin, in)");
        assert_eq!(s.requirements()[0].key, "in");
        assert!(s.matches(&labels(&[("in", "notin")])));
        assert!(sel("notin").matches(&labels(&[("notin", "")])));
        assert!(sel("a=in").matches(&labels(&[("a", "in")])));
        assert_eq!(sel("in=notin").to_string(), "in=notin");
    }

    #[test]
    fn prefixed_keys() {
        let s = sel("example.com/app=web,!kubernetes.io/hostname");
        assert!(s.matches(&labels(&[("example.com/app", "web")])));
    }

    #[test]
    fn errors() {
        let cases: &[(&str, usize, &str)] = &[
            (
                "app in prod",
                7,
                "expected \"(\" after \"in\", found \"prod\"",
            ),
            (
                "app notin",
                9,
                "expected \"(\" after \"notin\", found end of input",
            ),
            ("app in (a", 9, "unexpected end of input: expected \")\""),
            (
                "app in (a b)",
                10,
                "unexpected \"b\": expected \",\" or \")\"",
            ),
            (
                "app in (a))",
                10,
                "unexpected \")\": expected \",\" or end of input",
            ),
            (")", 0, "unexpected \")\": expected a label key or \"!\""),
            ("app=web)", 7, "unexpected \")\""),
            ("Bad_=x", 0, "invalid label key \"Bad_\""),
            ("a/b/c", 0, "invalid label key \"a/b/c\""),
            (
                "app=bad value",
                8,
                "unexpected \"value\": expected \",\" or end of input",
            ),
            ("app=-x", 4, "invalid label value \"-x\" for key \"app\""),
            ("app in (ok, -x)", 12, "invalid label value \"-x\""),
            ("app=web,", 8, "expected a requirement after \",\""),
            (
                "app=web,,x",
                8,
                "unexpected \",\": expected a label key or \"!\"",
            ),
            (",app", 0, "unexpected \",\""),
            ("!", 1, "expected a label key after \"!\""),
            (
                "!app=web",
                4,
                "unexpected \"=\": expected \",\" or end of input",
            ),
            ("app web", 4, "unexpected \"web\" after key \"app\""),
            ("app===web", 5, "expected a value after \"==\""),
            ("app=(x)", 4, "expected a value after \"=\""),
            ("app>x", 4, "needs an integer value, not \"x\""),
            ("app<", 4, "needs an integer value, not \"\""),
            ("app>-1", 4, "invalid label value \"-1\""),
            ("app>=1", 4, "expected a value after \">\""),
            ("app in (a=b)", 9, "unexpected \"=\""),
            ("é=1", 0, "invalid label key \"é\""),
        ];
        for (input, position, why) in cases {
            let e = err(input);
            assert_eq!(e.input, *input);
            assert_eq!(e.position, *position, "{input}: {e}");
            assert!(e.why.contains(why), "{input}: {:?} lacks {why:?}", e.why);
            assert!(e.to_string().contains(&format!("{input:?}")));
        }
    }

    #[test]
    fn display_is_canonical_and_round_trips() {
        let cases = [
            ("", ""),
            ("b=2,a=1", "a=1,b=2"),
            ("app==web", "app=web"),
            ("x in (c,a,b)", "x in (a,b,c)"),
            ("x notin (b, a)", "x notin (a,b)"),
            ("x, !y", "x,!y"),
            ("a in (,x)", "a in (,x)"),
            ("a in ()", "a in ()"),
            ("b<10, a > 007", "a>007,b<10"),
            ("a=", "a="),
            ("a!=", "a!="),
            ("a=1,a=1", "a=1"),
            ("a!=1,a=1,a", "a=1,a!=1,a"),
            ("example.com/k in (v)", "example.com/k in (v)"),
        ];
        for (input, canonical) in cases {
            let s = sel(input);
            assert_eq!(s.to_string(), canonical, "{input}");
            assert_eq!(sel(&s.to_string()), s, "{input}");
        }
    }

    #[test]
    fn programmatic_construction() {
        let from_labels = Selector::from_labels(&labels(&[("b", "2"), ("a", "1")]));
        assert_eq!(from_labels, sel("a=1,b=2"));
        assert!(Selector::from_labels(&labels(&[])).is_everything());

        let r = Requirement::new("env", Operator::In, ["prod", "dev"]).unwrap();
        let s = Selector::from_requirements(vec![r.clone()])
            .and(Requirement::new("gpu", Operator::Exists, Vec::<String>::new()).unwrap());
        assert_eq!(s, sel("gpu,env in (dev,prod)"));
        assert_eq!(s.requirements()[0], r);
        assert_eq!("app=x".parse::<Selector>(), Ok(sel("app=x")));

        let bad = |key: &str, op, values: &[&str]| {
            Requirement::new(key, op, values.iter().copied())
                .unwrap_err()
                .why
        };
        assert!(bad("Bad Key", Operator::Exists, &[]).contains("invalid label key \"Bad Key\""));
        assert!(bad("a", Operator::Equals, &[]).contains("exactly one value"));
        assert!(bad("a", Operator::Equals, &["x", "y"]).contains("exactly one value"));
        assert!(bad("a", Operator::In, &[]).contains("at least one value"));
        assert!(bad("a", Operator::Exists, &["x"]).contains("no values"));
        assert!(bad("a", Operator::In, &["bad value"]).contains("invalid label value"));
        assert!(bad("a", Operator::Gt, &["x"]).contains("integer"));
        assert!(bad("a", Operator::Lt, &[]).contains("exactly one value"));
    }

    #[test]
    fn gt_and_lt() {
        let gt = Requirement::new("cpus", Operator::Gt, ["4"]).unwrap();
        let lt = Requirement::new("cpus", Operator::Lt, ["-2"]).unwrap();
        assert!(gt.matches(&labels(&[("cpus", "8")])));
        assert!(!gt.matches(&labels(&[("cpus", "4")])));
        assert!(!gt.matches(&labels(&[("cpus", "many")])));
        assert!(!gt.matches(&labels(&[])));
        assert!(lt.matches(&labels(&[("cpus", "-3")])));
        assert!(!lt.matches(&labels(&[("cpus", "0")])));
        let s = Selector::from_requirements(vec![gt, lt]);
        assert_eq!(s.to_string(), "cpus>4,cpus<-2");
        assert_eq!(Operator::from_api_name("Gt"), Some(Operator::Gt));
        assert_eq!(Operator::from_api_name("gt"), None);
        assert_eq!(Operator::NotIn.to_string(), "NotIn");
    }

    fn expr(key: &str, operator: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: operator.into(),
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }

    #[test]
    fn label_selector_validation_paths() {
        let ls = LabelSelector {
            match_labels: labels(&[("Bad Key", "ok"), ("app", "bad value")]),
            match_expressions: vec![
                expr("tier", "In", &[]),
                expr("gpu", "Exists", &["x"]),
                expr("zone", "Near", &["a"]),
                expr("-bad", "NotIn", &["ok", "bad value"]),
                expr("fine", "DoesNotExist", &[]),
            ],
        };
        let causes = ls.validate("spec.selector");
        let found: Vec<(&str, &str)> = causes
            .iter()
            .map(|c| (c.field.as_str(), c.reason.as_str()))
            .collect();
        assert_eq!(
            found,
            vec![
                ("spec.selector.matchLabels", "FieldValueInvalid"),
                ("spec.selector.matchLabels", "FieldValueInvalid"),
                (
                    "spec.selector.matchExpressions[0].values",
                    "FieldValueRequired"
                ),
                (
                    "spec.selector.matchExpressions[1].values",
                    "FieldValueInvalid"
                ),
                (
                    "spec.selector.matchExpressions[2].operator",
                    "FieldValueNotSupported"
                ),
                ("spec.selector.matchExpressions[3].key", "FieldValueInvalid"),
                (
                    "spec.selector.matchExpressions[3].values[1]",
                    "FieldValueInvalid"
                ),
            ]
        );
        assert!(causes[0].message.contains("\"Bad Key\""));
        assert!(causes[1].message.contains("\"bad value\""));
        assert!(causes[4].message.contains("\"Near\""));
        assert!(causes[4]
            .message
            .contains("In, NotIn, Exists, DoesNotExist"));
        assert!(LabelSelector::default()
            .validate("spec.selector")
            .is_empty());
    }

    #[test]
    fn label_selector_conversion_and_matching() {
        let ls = LabelSelector {
            match_labels: labels(&[("app", "web")]),
            match_expressions: vec![
                expr("tier", "In", &["front", "edge"]),
                expr("env", "NotIn", &["dev"]),
                expr("gpu", "Exists", &[]),
                expr("canary", "DoesNotExist", &[]),
            ],
        };
        assert!(ls.validate("spec.selector").is_empty());
        let s = ls.to_selector().unwrap();
        assert_eq!(
            s,
            sel("app=web,tier in (front,edge),env notin (dev),gpu,!canary"),
            "{s}"
        );
        let good = labels(&[("app", "web"), ("tier", "edge"), ("gpu", "1")]);
        assert!(ls.matches(&good));
        let mut dev = good.clone();
        dev.insert("env".into(), "dev".into());
        assert!(!ls.matches(&dev));

        let empty = LabelSelector::default();
        assert!(empty.is_empty());
        assert!(empty.matches(&labels(&[])));
        assert!(empty.to_selector().unwrap().is_everything());
        assert!(!ls.is_empty());

        let bad = LabelSelector {
            match_labels: BTreeMap::new(),
            match_expressions: vec![expr("a", "Near", &["x"])],
        };
        assert!(bad
            .to_selector()
            .unwrap_err()
            .why
            .contains("\"Near\" is not supported"));
        assert!(
            !bad.matches(&labels(&[("a", "x")])),
            "an invalid selector matches nothing"
        );
        let bad = LabelSelector {
            match_labels: BTreeMap::new(),
            match_expressions: vec![expr("a", "In", &[])],
        };
        assert!(bad.to_selector().is_err());
    }

    #[test]
    fn label_selector_serde() {
        let yaml = "matchLabels:\n  app: web\nmatchExpressions:\n- key: tier\n  operator: In\n  \
                    values: [front]\n";
        let ls: LabelSelector = serde_norway::from_str(yaml).unwrap();
        assert_eq!(ls.match_expressions[0], expr("tier", "In", &["front"]));
        let json = serde_json::to_string(&LabelSelector::default()).unwrap();
        assert_eq!(json, "{}");
    }

    fn fields(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |field| {
            pairs
                .iter()
                .find(|(f, _)| *f == field)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn field_selector_matching() {
        let pod = fields(&[("metadata.name", "web-1"), ("spec.nodeName", "")]);
        let cases = [
            ("", true),
            ("metadata.name=web-1", true),
            ("metadata.name==web-1", true),
            (" metadata.name = web-1 ", true),
            ("metadata.name!=web-1", false),
            ("metadata.name=web-2", false),
            ("spec.nodeName=", true),
            ("spec.nodeName!=", false),
            ("metadata.name=web-1,spec.nodeName!=", false),
            ("status.phase=", true),
            ("status.phase!=Running", true),
            ("status.phase=Running", false),
            ("metadata.name=web-1,,", true),
        ];
        for (input, expected) in cases {
            let s = FieldSelector::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(s.matches(&pod), expected, "{input}");
        }
        assert!(FieldSelector::parse("").unwrap().is_everything());
        assert!(FieldSelector::default().is_everything());
        assert!(FieldSelector::everything().matches(&pod));
    }

    #[test]
    fn field_selector_escapes_and_errors() {
        let s = FieldSelector::parse(r"a=x\,y\=z\\,b!=").unwrap();
        assert_eq!(
            s.requirements(),
            &[
                FieldRequirement {
                    field: "a".into(),
                    operator: Operator::Equals,
                    value: r"x,y=z\".into()
                },
                FieldRequirement {
                    field: "b".into(),
                    operator: Operator::NotEquals,
                    value: "".into()
                },
            ]
        );
        assert_eq!(s.to_string(), r"a=x\,y\=z\\,b!=");
        assert_eq!(s.requires_exact_match("a"), Some(r"x,y=z\"));
        assert_eq!(s.requires_exact_match("b"), None);

        let cases: &[(&str, usize, &str)] = &[
            ("name", 0, "\"name\" has no operator"),
            ("a=b,name", 4, "has no operator"),
            ("=x", 0, "expected a field name"),
            ("a=b=c", 3, "\"=\" in a value must be escaped"),
            (r"a=\x", 2, "invalid escape \"\\x\""),
            (r"a=x\", 3, "lone \"\\\""),
            ("my field=x", 0, "must not contain ' '"),
            (r"a\b=x", 0, "must not contain '\\\\'"),
            ("a! =x", 0, "must not contain '!'"),
            ("a!b=x", 0, "must not contain '!'"),
        ];
        for (input, position, why) in cases {
            let e = FieldSelector::parse(input).expect_err(input);
            assert_eq!(e.position, *position, "{input}: {e}");
            assert!(e.why.contains(why), "{input}: {:?} lacks {why:?}", e.why);
        }
    }

    #[test]
    fn field_selector_display_round_trips() {
        for (input, canonical) in [
            ("", ""),
            ("b=1,a=2", "a=2,b=1"),
            ("a==x", "a=x"),
            ("a = x y ", "a=x y"),
            (r"a=\=", r"a=\="),
            ("a=1,a=1", "a=1"),
            ("a!=1", "a!=1"),
            ("a=é", "a=é"),
        ] {
            let s = FieldSelector::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(s.to_string(), canonical, "{input}");
            assert_eq!(
                FieldSelector::parse(&s.to_string()),
                Ok(s.clone()),
                "{input}"
            );
            assert_eq!(input.parse::<FieldSelector>(), Ok(s));
        }
    }

    #[test]
    fn never_panics_on_odd_input() {
        let odd = [
            "(",
            ")",
            "!",
            "!!",
            "!=",
            "==",
            "=",
            ",",
            "in",
            "in (",
            "a in (",
            "a in ((",
            "\\",
            "a=\u{0}",
            "\u{feff}a",
            "é in (é)",
            "a\u{3000}=b",
            "a=b\\",
            "a in (,,,)",
            "!a!",
            "a!=!",
            "🦀",
            "a==",
            "a!=,b",
            "a\n=\nb",
            "a=b,\u{a0}",
            "=\\",
            "a\\",
        ];
        for input in odd {
            if let Ok(s) = Selector::parse(input) {
                assert_eq!(Selector::parse(&s.to_string()), Ok(s), "{input:?}");
            }
            if let Ok(s) = FieldSelector::parse(input) {
                assert_eq!(FieldSelector::parse(&s.to_string()), Ok(s), "{input:?}");
            }
        }
    }
}
