//! Label selector strings as Kubernetes' `labels.Parse` reads them: kubectl passes `-l` to
//! the server unparsed, so Shoal must accept what Kubernetes accepts, match it the same way,
//! and refuse what Kubernetes refuses. The expectations come from Kubernetes' grammar and
//! rules (apimachinery `pkg/labels`), stated here as cases.

use std::collections::BTreeMap;

use bus_schemas::selector::Selector;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

type Labels = &'static [(&'static str, &'static str)];

/// An accepted selector, with label sets it must and must not match.
struct Accepted {
    input: &'static str,
    matches: &'static [Labels],
    misses: &'static [Labels],
}

const fn ok(
    input: &'static str,
    matches: &'static [Labels],
    misses: &'static [Labels],
) -> Accepted {
    Accepted {
        input,
        matches,
        misses,
    }
}

const NONE: Labels = &[];

const ACCEPTED: &[Accepted] = &[
    // Empty and blank selectors select everything.
    ok("", &[NONE, &[("a", "b")]], &[]),
    ok("  \t\r\n ", &[NONE, &[("a", "b")]], &[]),
    // Equality, three spellings of two operators.
    ok("x=a", &[&[("x", "a")], &[("x", "a"), ("y", "b")]], &[NONE, &[("x", "b")]]),
    ok("x==a", &[&[("x", "a")]], &[NONE, &[("x", "b")]]),
    ok("x!=a", &[NONE, &[("x", "b")], &[("y", "a")]], &[&[("x", "a")]]),
    // Whitespace anywhere between tokens: space, tab, CR, LF.
    ok(" x = a ", &[&[("x", "a")]], &[NONE]),
    ok("\tx\n==\ra", &[&[("x", "a")]], &[NONE]),
    // An absent value is the empty value.
    ok("x=", &[&[("x", "")]], &[NONE, &[("x", "a")]]),
    ok("x==", &[&[("x", "")]], &[NONE]),
    ok("x!=", &[NONE, &[("x", "a")]], &[&[("x", "")]]),
    ok("x=,y", &[&[("x", ""), ("y", "1")]], &[&[("x", "")]]),
    // Existence.
    ok("x", &[&[("x", "")], &[("x", "a")]], &[NONE, &[("y", "a")]]),
    ok("!x", &[NONE, &[("y", "a")]], &[&[("x", "")]]),
    ok("! x", &[NONE], &[&[("x", "a")]]),
    ok("x,y", &[&[("x", "1"), ("y", "2")]], &[&[("x", "1")]]),
    ok("!x,x", &[], &[NONE, &[("x", "a")]]),
    // Sets; an empty slot is the empty value, `()` is the set of only "".
    ok("x in (a,b)", &[&[("x", "a")], &[("x", "b")]], &[NONE, &[("x", "c")]]),
    ok("x in(a)", &[&[("x", "a")]], &[NONE]),
    ok("x notin (a,b)", &[NONE, &[("x", "c")]], &[&[("x", "a")], &[("x", "b")]]),
    ok("x notin(a)", &[NONE], &[&[("x", "a")]]),
    ok("x in ()", &[&[("x", "")]], &[NONE, &[("x", "a")]]),
    ok("x notin ()", &[NONE, &[("x", "a")]], &[&[("x", "")]]),
    ok("x in (a,)", &[&[("x", "a")], &[("x", "")]], &[NONE, &[("x", "b")]]),
    ok("x in (,a)", &[&[("x", "a")], &[("x", "")]], &[&[("x", "b")]]),
    ok("x in (a,,b)", &[&[("x", "")], &[("x", "b")]], &[&[("x", "c")]]),
    ok("x in ( a , b )", &[&[("x", "b")]], &[&[("x", "c")]]),
    // `in` and `notin` are keywords only where an operator goes.
    ok("x in (in,notin)", &[&[("x", "in")], &[("x", "notin")]], &[&[("x", "a")]]),
    ok("x=in", &[&[("x", "in")]], &[&[("x", "a")]]),
    ok("in=notin", &[&[("in", "notin")]], &[NONE]),
    ok("notin notin (in)", &[NONE, &[("notin", "x")]], &[&[("notin", "in")]]),
    ok("in", &[&[("in", "")]], &[NONE]),
    ok("!notin", &[NONE], &[&[("notin", "")]]),
    // Integer comparisons: the label must exist and read as a 64-bit integer.
    ok("x>1", &[&[("x", "2")], &[("x", "100")]], &[NONE, &[("x", "1")], &[("x", "a")], &[("x", "")]]),
    ok("x<1", &[&[("x", "0")]], &[NONE, &[("x", "1")], &[("x", "2")], &[("x", "z")]]),
    ok("x > 1", &[&[("x", "2")]], &[&[("x", "1")]]),
    ok("x>007", &[&[("x", "8")], &[("x", "08")]], &[&[("x", "7")]]),
    ok("x>0,x<10", &[&[("x", "5")]], &[&[("x", "0")], &[("x", "10")]]),
    ok("x<9223372036854775807", &[&[("x", "1")]], &[&[("x", "9223372036854775807")]]),
    // Several requirements are ANDed.
    ok(
        "a=b,c!=d,e in (f),g notin (h),!i,j",
        &[&[("a", "b"), ("e", "f"), ("j", "")]],
        &[&[("a", "b"), ("e", "f")], &[("a", "b"), ("e", "f"), ("j", ""), ("i", "")]],
    ),
    // Keys with prefixes, and the longest names and values allowed.
    ok("example.com/app=web", &[&[("example.com/app", "web")]], &[&[("app", "web")]]),
    ok("a.b-c_d.E9=A-b_c.9", &[&[("a.b-c_d.E9", "A-b_c.9")]], &[NONE]),
    ok(
        "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk=vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv",
        &[],
        &[NONE],
    ),
];

/// Refused selectors, each for a reason Kubernetes refuses it.
const REFUSED: &[&str] = &[
    // Structure.
    ",",
    "x,",
    ",x",
    "x,,y",
    "x=a,",
    "=a",
    "==a",
    "!",
    "!=a",
    "(x)",
    ")",
    "x y",
    "x=a b",
    "x = a = b",
    "x=a=b",
    "x!a",
    "x===a",
    "x=!a",
    "x=(a)",
    // `!key` takes no operator.
    "!x=a",
    "!x in (a)",
    "!x>1",
    // Sets.
    "x in",
    "x notin",
    "x in a",
    "x in (a",
    "x in (a b)",
    "x in (a))",
    "x in ((a))",
    "x in (a=b)",
    "x in (a),",
    "x in (a) y",
    "x in (a,-b)",
    // A set needs its parentheses, even around a keyword.
    "x in in",
    // Integer comparisons.
    "x>",
    "x<",
    "x>a",
    "x>1.5",
    "x>-1",
    "x>+1",
    "x>=1",
    "x<=1",
    "x<>1",
    "x>1>2",
    "x>99999999999999999999",
    "x>(1)",
    // Keys.
    "-x=a",
    "x-=a",
    "Bad_=x",
    "x/=a",
    "/x=a",
    "a/b/c=d",
    "é=1",
    "x$=a",
    "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk=a",
    // Values.
    "x=-a",
    "x=a-",
    "x=a$",
    "x=é",
    "x!=_a",
    "x=vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv",
];

#[test]
fn accepted_selectors_parse_and_match_as_kubernetes_matches_them() {
    for case in ACCEPTED {
        let selector = Selector::parse(case.input)
            .unwrap_or_else(|e| panic!("{:?} should parse: {e}", case.input));
        for set in case.matches {
            assert!(
                selector.matches(&labels(set)),
                "{:?} should match {set:?}",
                case.input
            );
        }
        for set in case.misses {
            assert!(
                !selector.matches(&labels(set)),
                "{:?} should not match {set:?}",
                case.input
            );
        }
        // The canonical form means the same.
        let again = Selector::parse(&selector.to_string())
            .unwrap_or_else(|e| panic!("{:?} printed as {selector}: {e}", case.input));
        assert_eq!(again, selector, "{:?}", case.input);
    }
}

#[test]
fn refused_selectors_are_refused_with_their_position() {
    for input in REFUSED {
        let error = Selector::parse(input)
            .err()
            .unwrap_or_else(|| panic!("{input:?} should be refused"));
        assert_eq!(error.input, *input);
        assert!(error.position <= input.len(), "{input:?}: {error}");
        assert!(!error.why.is_empty(), "{input:?}");
    }
}
