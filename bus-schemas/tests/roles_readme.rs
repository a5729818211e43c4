//! The README's "Roles" section names every role there is: a role added to `roles.rs` must be
//! documented for operators and integrations.

use bus_schemas::roles::{Role, KINDS};

#[test]
fn every_role_is_documented_in_the_readme() {
    let readme = include_str!("../README.md");
    let section = readme
        .split("## Roles")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("the README has a Roles section");
    for kind in KINDS {
        let role = match kind {
            "node" => Role::Node("n1".into()),
            "app" => Role::App("jobs".into()),
            other => Role::parse(other).expect("KINDS holds role names"),
        };
        assert_eq!(role.kind(), kind);
        assert!(
            section.contains(&format!("| `{kind}`")),
            "role {kind} is missing from the README's Roles table"
        );
    }
}
