//! Stock kubectl against the gateway: discovery, server-side Tables and output formats,
//! writes of every kind of patch, scale, delete, and bad input refused with nothing written.

mod common;

use common::{pod, Env, DEPLOYMENT};

#[actix::test]
async fn discovery_version_and_cluster_info() {
    let env = Env::start().await;
    let version = env.ok(&["version"]).await;
    assert!(version.contains("Server Version: v1.32"), "{version}");
    let resources = env.ok(&["api-resources"]).await;
    for row in [
        ["deployments", "deploy", "apps/v1"],
        ["pods", "po", "v1"],
        ["horizontalpodautoscalers", "hpa", "autoscaling/v2"],
        ["verticalpodautoscalers", "vpa", "autoscaling.k8s.io/v1"],
    ] {
        assert!(
            resources
                .lines()
                .any(|l| row.iter().all(|c| l.split_whitespace().any(|w| w == *c))),
            "{row:?} missing from:\n{resources}"
        );
    }
    let versions = env.ok(&["api-versions"]).await;
    assert!(versions.lines().any(|l| l == "apps/v1"), "{versions}");
    assert!(versions.lines().any(|l| l == "v1"), "{versions}");
    // The VPA short name resolves through discovery, and its Table prints upstream's columns.
    let vpa = env
        .with_stdin(
            &["create", "-f", "-"],
            r#"{"apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
                "metadata": {"name": "web"},
                "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                         "updatePolicy": {"updateMode": "Off"}}}"#,
        )
        .await;
    assert!(vpa.ok, "{}", vpa.stderr);
    let table = env.ok(&["get", "vpa"]).await;
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "MODE", "CPU", "MEM", "PROVIDED", "AGE"]);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("web ") && l.contains("Off")),
        "{table}"
    );
    let info = env.ok(&["cluster-info"]).await;
    assert!(info.contains("is running at https://127.0.0.1:"), "{info}");
}

#[actix::test]
async fn get_prints_tables_and_every_output_format() {
    let env = Env::start().await;
    for (name, app) in [("a", "web"), ("b", "web"), ("c", "db")] {
        let out = env
            .with_stdin(&["create", "-f", "-"], &pod(name, app))
            .await;
        assert!(out.ok, "{}", out.stderr);
        assert!(
            out.stdout.contains(&format!("pod/{name} created")),
            "{}",
            out.stdout
        );
    }
    let table = env.ok(&["get", "pods"]).await;
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("a ") && l.contains("0/1")),
        "{table}"
    );

    let wide = env.ok(&["get", "pods", "-o", "wide"]).await;
    assert!(
        wide.lines().next().unwrap().contains("NOMINATED NODE"),
        "{wide}"
    );

    let selected = env
        .ok(&["get", "pods", "-l", "app in (web)", "-o", "name"])
        .await;
    assert_eq!(selected.lines().collect::<Vec<_>>(), ["pod/a", "pod/b"]);
    let by_field = env
        .ok(&[
            "get",
            "pods",
            "--field-selector",
            "metadata.name!=a",
            "-o",
            "name",
        ])
        .await;
    assert_eq!(by_field.lines().collect::<Vec<_>>(), ["pod/b", "pod/c"]);

    let all = env.ok(&["get", "pods", "-A"]).await;
    assert!(
        all.lines().next().unwrap().starts_with("NAMESPACE"),
        "{all}"
    );
    assert!(
        all.lines()
            .any(|l| l.starts_with("default") && l.contains(" c ")),
        "{all}"
    );
    let bare = env.ok(&["get", "pods", "--no-headers"]).await;
    assert_eq!(bare.lines().count(), 3, "{bare}");
    assert!(!bare.contains("NAME"));
    let labels = env.ok(&["get", "pod", "c", "--show-labels"]).await;
    assert!(
        labels.lines().nth(1).unwrap().ends_with("app=db"),
        "{labels}"
    );

    let jsonpath = env
        .ok(&[
            "get",
            "pod",
            "a",
            "-o",
            "jsonpath={.metadata.labels.app}/{.spec.containers[0].image}",
        ])
        .await;
    assert_eq!(jsonpath, "web/shoal/busybox:1.35");
    let columns = env
        .ok(&[
            "get",
            "pods",
            "-o",
            "custom-columns=N:.metadata.name,APP:.metadata.labels.app",
        ])
        .await;
    assert!(
        columns
            .lines()
            .any(|l| l.split_whitespace().eq(["c", "db"])),
        "{columns}"
    );
    let yaml = env.ok(&["get", "pod", "a", "-o", "yaml"]).await;
    assert!(
        yaml.contains("kind: Pod") && yaml.contains("resourceVersion:"),
        "{yaml}"
    );
    let json = env.ok(&["get", "pods", "-o", "json"]).await;
    let list: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), 3);

    let ns = env.ok(&["get", "ns"]).await;
    assert!(
        ns.lines()
            .any(|l| l.starts_with("default ") && l.contains("Active")),
        "{ns}"
    );
    let missing = env.fails(&["get", "pod", "nope"]).await;
    assert!(missing.contains("NotFound"), "{missing}");
    let described = env.ok(&["describe", "pod", "a"]).await;
    assert!(
        described.contains("Name:") && described.contains("app=web"),
        "{described}"
    );
}

#[actix::test]
async fn apply_keeps_what_label_and_annotate_added_and_patches_merge() {
    let env = Env::start().await;
    let file = env.write_file("deploy.yaml", DEPLOYMENT);
    let created = env.ok(&["apply", "-f", &file]).await;
    assert!(created.contains("deployment.apps/web created"), "{created}");
    let unchanged = env.ok(&["apply", "-f", &file]).await;
    assert!(unchanged.contains("unchanged"), "{unchanged}");

    env.ok(&["label", "deploy", "web", "team=blue"]).await;
    env.ok(&["annotate", "deploy", "web", "note=keep"]).await;
    let changed = env.write_file(
        "deploy2.yaml",
        &DEPLOYMENT.replace("replicas: 2", "replicas: 3"),
    );
    let configured = env.ok(&["apply", "-f", &changed]).await;
    assert!(configured.contains("configured"), "{configured}");
    let seen = env
        .ok(&[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.spec.replicas} {.metadata.labels.team} {.metadata.annotations.note}",
        ])
        .await;
    assert_eq!(seen, "3 blue keep");

    env.ok(&[
        "patch",
        "deploy",
        "web",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"replicas":4}}"#,
    ])
    .await;
    env.ok(&[
        "patch",
        "deploy",
        "web",
        "--type",
        "json",
        "-p",
        r#"[{"op":"add","path":"/spec/minReadySeconds","value":1}]"#,
    ])
    .await;
    env.ok(&["patch", "deploy", "web", "--type", "strategic", "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[{"name":"B","value":"2"}]}]}}}}"#])
        .await;
    let env_vars = env
        .ok(&["get", "deploy", "web", "-o", "jsonpath={.spec.replicas} {.spec.minReadySeconds} {.spec.template.spec.containers[0].env[*].name}"])
        .await;
    assert_eq!(
        env_vars, "4 1 A B",
        "strategic merge keeps A and adds B by name"
    );

    let scaled = env.ok(&["scale", "deploy", "web", "--replicas=1"]).await;
    assert!(scaled.contains("scaled"), "{scaled}");
    let replicas = env
        .ok(&["get", "deploy", "web", "-o", "jsonpath={.spec.replicas}"])
        .await;
    assert_eq!(replicas, "1");

    // replace: the whole object, by resourceVersion.
    // The controllers may write the status between the read and the replace, which is a
    // Conflict as on any cluster: read again and retry, as a user would.
    let edited = std::cell::RefCell::new(String::new());
    common::eventually(
        "a replace from a fresh read",
        std::time::Duration::from_secs(30),
        || async {
            let yaml = env.ok(&["get", "deploy", "web", "-o", "yaml"]).await;
            let file = env.write_file("replace.yaml", &yaml.replace("replicas: 1", "replicas: 2"));
            *edited.borrow_mut() = file.clone();
            env.kubectl(&["replace", "-f", &file]).await.ok
        },
    )
    .await;
    let edited = edited.into_inner();
    let stale = env.fails(&["replace", "-f", &edited]).await;
    assert!(
        stale.contains("Conflict") || stale.contains("modified"),
        "{stale}"
    );

    // edit: kubectl opens the object in $KUBE_EDITOR and sends what changed as a patch (a
    // status write in between is a Conflict kubectl reports: edit again, as a user would).
    let editor = env.write_file(
        "editor.sh",
        "#!/bin/sh\nsed -i 's/^  replicas: 2$/  replicas: 5/' \"$1\"\n",
    );
    std::fs::set_permissions(&editor, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    common::eventually(
        "kubectl edit through $KUBE_EDITOR",
        std::time::Duration::from_secs(30),
        || async {
            let mut edit = env.command(&["edit", "deploy", "web"]);
            edit.env("KUBE_EDITOR", &editor);
            let out = edit.output().await.expect("running kubectl edit");
            out.status.success() && String::from_utf8_lossy(&out.stdout).contains("edited")
        },
    )
    .await;
    let replicas = env
        .ok(&["get", "deploy", "web", "-o", "jsonpath={.spec.replicas}"])
        .await;
    assert_eq!(replicas, "5", "the edit landed");

    let rs = common::eventually(
        "the deployment's ReplicaSet",
        std::time::Duration::from_secs(20),
        || async { !env.ok(&["get", "rs", "-o", "name"]).await.is_empty() },
    );
    rs.await;
    // kubectl's own wait (the default): a GET, then a list and a watch by `metadata.name`
    // until DELETED. The timeout only turns a missed tombstone into a failure, not a hang.
    let deleted = env
        .ok(&[
            "delete",
            "deploy",
            "web",
            "--cascade=orphan",
            "--timeout=60s",
        ])
        .await;
    assert!(deleted.contains("deleted"), "{deleted}");
    let orphans = env.ok(&["get", "rs", "-o", "name"]).await;
    assert!(
        !orphans.is_empty(),
        "--cascade=orphan keeps the ReplicaSets"
    );
    let gone = env.fails(&["get", "deploy", "web"]).await;
    assert!(gone.contains("NotFound"), "{gone}");
}

#[actix::test]
async fn rollout_commands_wait_and_delete_with_grace() {
    let env = Env::start().await;
    let file = env.write_file("deploy.yaml", DEPLOYMENT);
    env.ok(&["apply", "-f", &file]).await;
    env.ok(&["set", "image", "deploy/web", "web=shoal/busybox:1.36"])
        .await;
    let history = env.ok(&["rollout", "history", "deploy/web"]).await;
    assert!(
        history.lines().any(|l| l.trim_start().starts_with('2')),
        "{history}"
    );
    env.ok(&["rollout", "undo", "deploy/web"]).await;
    let image = env
        .ok(&[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].image}",
        ])
        .await;
    assert_eq!(image, "shoal/busybox:1.35");
    env.ok(&["rollout", "pause", "deploy/web"]).await;
    assert_eq!(
        env.ok(&["get", "deploy", "web", "-o", "jsonpath={.spec.paused}"])
            .await,
        "true"
    );
    env.ok(&["rollout", "resume", "deploy/web"]).await;
    let restarted = env.ok(&["rollout", "restart", "deploy/web"]).await;
    assert!(restarted.contains("restarted"), "{restarted}");
    let annotation = env
        .ok(&[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.spec.template.metadata.annotations}",
        ])
        .await;
    assert!(
        annotation.contains("kubectl.kubernetes.io/restartedAt"),
        "{annotation}"
    );

    // Without nodes no pod runs; a Deployment of zero replicas completes its rollout.
    let zero = env.write_file(
        "zero.yaml",
        &DEPLOYMENT
            .replace("name: web", "name: zero")
            .replace("replicas: 2", "replicas: 0"),
    );
    env.ok(&["apply", "-f", &zero]).await;
    let status = env
        .ok(&["rollout", "status", "deploy/zero", "--timeout=30s"])
        .await;
    assert!(status.contains("successfully rolled out"), "{status}");
    let waited = env
        .ok(&[
            "wait",
            "--for=condition=Available",
            "deploy/zero",
            "--timeout=30s",
        ])
        .await;
    assert!(waited.contains("condition met"), "{waited}");

    let out = env
        .with_stdin(&["create", "-f", "-"], &pod("solo", "x"))
        .await;
    assert!(out.ok, "{}", out.stderr);
    let deleted = env
        .ok(&["delete", "pod", "solo", "--grace-period=0", "--wait=true"])
        .await;
    assert!(deleted.contains("pod \"solo\" deleted"), "{deleted}");
    assert!(env
        .fails(&["get", "pod", "solo"])
        .await
        .contains("NotFound"));
}

#[actix::test]
async fn bad_input_is_refused_with_a_field_path_and_nothing_is_written() {
    let env = Env::start().await;
    let pods = "/api/v1/namespaces/default/pods";
    let cases = [
        ("malformed.json", r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"m",}}"#.to_string(), pods.to_string(), "not valid JSON"),
        ("kind.json", r#"{"apiVersion":"v1","kind":"Widget","metadata":{"name":"k"}}"#.to_string(), pods.to_string(), "kind"),
        ("version.json", r#"{"apiVersion":"v2","kind":"Pod","metadata":{"name":"v"}}"#.to_string(), pods.to_string(), "API version"),
        ("unknown.json",
         r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"u"},"spec":{"containers":[{"name":"a","image":"b","imagePullPolcy":"Always"}]}}"#.to_string(),
         format!("{pods}?fieldValidation=Strict"),
         "spec.containers[0].imagePullPolcy"),
        ("big.json", format!(r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"big","annotations":{{"a":"{}"}}}}}}"#, "x".repeat(3 * 1024 * 1024 + 1)), pods.to_string(), "larger than the limit"),
    ];
    for (file, body, uri, expected) in cases {
        let path = env.write_file(file, &body);
        let stderr = env.fails(&["create", "--raw", &uri, "-f", &path]).await;
        assert!(stderr.contains(expected), "{file}: {stderr}");
    }
    // A manifest with a typo through kubectl's default strict validation.
    let typo = pod("typo", "x").replace("    image:", "    imagePullPolcy: Always\n    image:");
    let out = env.with_stdin(&["apply", "-f", "-"], &typo).await;
    assert!(
        !out.ok
            && out
                .stderr
                .contains("unknown field \"spec.containers[0].imagePullPolcy\""),
        "{}",
        out.stderr
    );
    let listed = env.ok(&["get", "pods", "-o", "name"]).await;
    assert_eq!(listed, "", "nothing was written");
    // Unknown resources are a NotFound Status, not a hang or a crash.
    let unknown = env
        .fails(&["get", "--raw", "/api/v1/namespaces/default/widgets"])
        .await;
    assert!(
        unknown.contains("NotFound") || unknown.contains("not found"),
        "{unknown}"
    );
}

/// `kubectl apply --server-side` through the API's field managers: a re-apply keeps what
/// another writer added, a second manager changing a field the first owns gets a Conflict
/// naming the field and its owner and nothing is written, `--force-conflicts` takes the field
/// over, and the ownership shows with `--show-managed-fields`.
#[actix::test]
async fn server_side_apply_merges_and_names_conflicting_fields_and_their_manager() {
    let env = Env::start().await;
    let file = env.write_file("deploy.yaml", DEPLOYMENT);
    let applied = env.ok(&["apply", "--server-side", "-f", &file]).await;
    assert!(
        applied.contains("deployment.apps/web serverside-applied"),
        "{applied}"
    );
    env.ok(&["label", "deploy", "web", "team=blue"]).await;
    env.ok(&["apply", "--server-side", "-f", &file]).await;
    let replicas_and_team = "jsonpath={.spec.replicas} {.metadata.labels.team}";
    let before = env
        .ok(&["get", "deploy", "web", "-o", replicas_and_team])
        .await;
    assert_eq!(before, "2 blue", "the re-apply keeps kubectl-label's label");

    let other = env.write_file(
        "other.yaml",
        &DEPLOYMENT.replace("replicas: 2", "replicas: 5"),
    );
    let conflict = env
        .fails(&[
            "apply",
            "--server-side",
            "--field-manager=ops",
            "-f",
            &other,
        ])
        .await;
    assert!(
        conflict.contains("conflict with \"kubectl\"") && conflict.contains(".spec.replicas"),
        "{conflict}"
    );
    let unchanged = env
        .ok(&["get", "deploy", "web", "-o", replicas_and_team])
        .await;
    assert_eq!(unchanged, "2 blue", "a conflict writes nothing");

    env.ok(&[
        "apply",
        "--server-side",
        "--field-manager=ops",
        "--force-conflicts",
        "-f",
        &other,
    ])
    .await;
    let forced = env
        .ok(&["get", "deploy", "web", "-o", replicas_and_team])
        .await;
    assert_eq!(forced, "5 blue");
    let yaml = env
        .ok(&[
            "get",
            "deploy",
            "web",
            "-o",
            "yaml",
            "--show-managed-fields",
        ])
        .await;
    for expected in [
        "manager: ops",
        "operation: Apply",
        "f:replicas",
        "manager: kubectl-label",
    ] {
        assert!(yaml.contains(expected), "{expected} missing from:\n{yaml}");
    }
    let plain = env.ok(&["get", "deploy", "web", "-o", "yaml"]).await;
    assert!(!plain.contains("managedFields"), "{plain}");
}

#[actix::test]
async fn explain_describes_fields_from_the_bus_schemas() {
    let env = Env::start().await;
    let image = env.ok(&["explain", "pod.spec.containers.image"]).await;
    assert!(image.contains("KIND:       Pod"), "{image}");
    assert!(image.contains("FIELD: image <string>"), "{image}");
    assert!(image.contains("The image to run"), "{image}");
    let replicas = env.ok(&["explain", "deployment.spec.replicas"]).await;
    assert!(replicas.contains("GROUP:      apps"), "{replicas}");
    assert!(replicas.contains("FIELD: replicas <integer>"), "{replicas}");
    assert!(replicas.contains("1 when unset"), "{replicas}");
    let strategy = env.ok(&["explain", "deploy.spec.strategy"]).await;
    assert!(strategy.contains("RollingUpdate"), "{strategy}");
    assert!(strategy.contains("rollingUpdate"), "{strategy}");
    // A kind's own fields, with the shared ones described once for all kinds.
    let service = env.ok(&["explain", "svc"]).await;
    for field in [
        "apiVersion\t<string>",
        "metadata\t<",
        "spec\t<",
        "status\t<",
    ] {
        assert!(service.contains(field), "{field} missing from:\n{service}");
    }
    assert!(service.contains("stable virtual IP"), "{service}");
    let missing = env.fails(&["explain", "pod.spec.nosuchfield"]).await;
    assert!(missing.contains("nosuchfield"), "{missing}");
}

#[actix::test]
async fn autoscale_writes_autoscaling_v1_and_both_versions_read_it() {
    let env = Env::start().await;
    let out = env.with_stdin(&["apply", "-f", "-"], DEPLOYMENT).await;
    assert!(out.ok, "{}", out.stderr);
    let made = env
        .ok(&[
            "autoscale",
            "deploy/web",
            "--min",
            "2",
            "--max",
            "5",
            "--cpu-percent",
            "60",
        ])
        .await;
    assert!(
        made.contains("horizontalpodautoscaler.autoscaling/web autoscaled"),
        "{made}"
    );
    let table = env.ok(&["get", "hpa"]).await;
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "REFERENCE",
            "TARGETS",
            "MINPODS",
            "MAXPODS",
            "REPLICAS",
            "AGE"
        ],
        "{table}"
    );
    let row = table.lines().nth(1).unwrap();
    assert!(row.contains("Deployment/web"), "{table}");
    assert!(row.contains("cpu: <unknown>/60%"), "{table}");
    // "cpu: <unknown>/60%" is two words: MINPODS and MAXPODS follow it.
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(&cells[4..6], ["2", "5"], "{table}");

    // v2 (the preferred version) holds the target as a metric; v1 as its one field. (The
    // short name would expand to the preferred version: v1 is asked for by its full name.)
    let v2_target = "jsonpath={.apiVersion} {.spec.metrics[0].resource.target.averageUtilization}";
    assert_eq!(
        env.ok(&["get", "hpa", "web", "-o", v2_target]).await,
        "autoscaling/v2 60"
    );
    let v1_target = "jsonpath={.apiVersion} {.spec.targetCPUUtilizationPercentage}";
    assert_eq!(
        env.ok(&[
            "get",
            "horizontalpodautoscalers.v1.autoscaling",
            "web",
            "-o",
            v1_target
        ])
        .await,
        "autoscaling/v1 60"
    );

    // A v1 write keeps what only v2 can say (here a memory metric) through the annotations
    // the v1 form carries it in.
    env.ok(&[
        "patch",
        "hpa",
        "web",
        "--type",
        "json",
        "-p",
        r#"[{"op":"add","path":"/spec/metrics/-","value":{"type":"Resource","resource":{"name":"memory","target":{"type":"AverageValue","averageValue":"100Mi"}}}}]"#,
    ])
    .await;
    env.ok(&[
        "patch",
        "horizontalpodautoscalers.v1.autoscaling",
        "web",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"targetCPUUtilizationPercentage":70}}"#,
    ])
    .await;
    let metrics = env
        .ok(&[
            "get",
            "hpa",
            "web",
            "-o",
            "jsonpath={range .spec.metrics[*]}{.resource.name} {end}",
        ])
        .await;
    assert_eq!(metrics.trim(), "cpu memory");
    let annotations = env
        .ok(&[
            "get",
            "hpa",
            "web",
            "-o",
            "jsonpath={.metadata.annotations}",
        ])
        .await;
    assert!(!annotations.contains("autoscaling.alpha"), "{annotations}");
    assert_eq!(
        env.ok(&["get", "hpa", "web", "-o", v2_target]).await,
        "autoscaling/v2 70"
    );
}
