//! JSON merge patch (RFC 7386): what `shoal label`, `annotate`, `scale` and `patch` send.

use serde_json::Value;

pub fn apply(target: &mut Value, patch: &Value) {
    let Value::Object(patch_map) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Default::default());
    }
    let Value::Object(target_map) = target else {
        return;
    };
    for (key, value) in patch_map {
        if value.is_null() {
            target_map.remove(key);
        } else {
            apply(target_map.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rfc7386_examples() {
        let mut doc = json!({"a": "b", "c": {"d": "e", "f": "g"}});
        apply(&mut doc, &json!({"a": "z", "c": {"f": null}}));
        assert_eq!(doc, json!({"a": "z", "c": {"d": "e"}}));
        let mut doc = json!({"a": [1, 2]});
        apply(&mut doc, &json!({"a": [3]}));
        assert_eq!(doc, json!({"a": [3]}));
        let mut doc = json!({"a": 1});
        apply(&mut doc, &json!({"b": {"c": null}}));
        assert_eq!(doc, json!({"a": 1, "b": {}}));
    }
}
