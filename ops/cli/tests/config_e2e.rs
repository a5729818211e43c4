//! ConfigMaps and Secrets through the `shoal` command on a one-machine cluster with real
//! containers (`shoal up`): `create configmap|secret`, their table rows and descriptions (a
//! Secret's values never shown), a pod that reads them, and the termination message that
//! pod leaves, as `describe pod` shows it.

mod up_cluster;

use up_cluster::Cluster;

const POD: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: reporter}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  volumes:
  - name: settings
    configMap: {name: app}
  containers:
  - name: main
    image: shoal/busybox:1.35
    env:
    - name: GREETING
      valueFrom: {configMapKeyRef: {name: app, key: greeting}}
    - name: PASSWORD
      valueFrom: {secretKeyRef: {name: db, key: password}}
    volumeMounts:
    - {name: settings, mountPath: /etc/app}
    command:
    - sh
    - -c
    - |
      test "$PASSWORD" = hunter2 && seen=secret-ok
      echo "$GREETING from $(cat /etc/app/mode.txt) $seen" > /dev/termination-log
      exit 3
"#;

#[test]
fn config_from_the_command_line_reaches_a_pod_whose_termination_message_describe_shows() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), &[]);
    let mode = dir.path().join("mode.txt");
    std::fs::write(&mode, "fast").unwrap();

    let (ok, out, err) = cluster.run(&[
        "create",
        "configmap",
        "app",
        "--from-literal=greeting=hello",
        &format!("--from-file={}", mode.display()),
    ]);
    assert!(ok && out.contains("configmap/app created"), "{out}{err}");
    let (ok, out, err) = cluster.run(&[
        "create",
        "secret",
        "generic",
        "db",
        "--from-literal=password=hunter2",
    ]);
    assert!(ok && out.contains("secret/db created"), "{out}{err}");

    let (_, table, _) = cluster.run(&["get", "cm,secret", "--no-headers"]);
    let row = |name: &str| {
        table
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .unwrap_or_else(|| panic!("no row {name} in\n{table}"))
    };
    assert_eq!(row("configmap/app")[1], "2", "{table}");
    assert_eq!(row("secret/db")[1..3], ["Opaque", "1"], "{table}");
    let (_, described, _) = cluster.run(&["describe", "secret", "db"]);
    assert!(described.contains("password:  7 bytes"), "{described}");
    assert!(
        !described.contains("hunter2"),
        "describe shows a Secret's value"
    );

    cluster.apply(dir.path(), "pod.yaml", POD);
    let mut described = String::new();
    cluster.wait("the pod's termination in describe", |c| {
        described = c.run(&["describe", "pod", "reporter"]).1;
        described.contains("Exit Code:    3")
    });
    for line in [
        "    State:          Terminated",
        "      Reason:       Error",
        "      Message:      hello from fast secret-ok",
    ] {
        assert!(described.contains(line), "no {line:?} in\n{described}");
    }
}
