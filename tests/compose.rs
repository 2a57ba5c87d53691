//! docker-compose.yml describes the five nodes the README tells users to run.

use yaml_rust2::{Yaml, YamlLoader};

fn compose() -> Yaml {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docker-compose.yml"))
        .expect("docker-compose.yml is readable");
    let mut docs = YamlLoader::load_from_str(&text).expect("docker-compose.yml is valid YAML");
    assert_eq!(docs.len(), 1, "one YAML document");
    docs.remove(0)
}

fn strings(yaml: &Yaml) -> Vec<&str> {
    yaml.as_vec()
        .map(|v| v.iter().filter_map(Yaml::as_str).collect())
        .unwrap_or_default()
}

/// The `REDQUORUM_NODES=...` value the README gives.
fn readme_nodes() -> Vec<String> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md is readable");
    let line = readme
        .lines()
        .find_map(|l| l.split("REDQUORUM_NODES=").nth(1))
        .expect("the README shows REDQUORUM_NODES=...");
    let value = line.split_whitespace().next().unwrap_or_default();
    value.split(',').map(str::to_owned).collect()
}

#[test]
fn compose_runs_five_redis7_masters_without_persistence_and_with_healthchecks() {
    let doc = compose();
    let services = doc["services"].as_hash().expect("services");
    assert_eq!(services.len(), 5, "five nodes");
    let mut host_ports = Vec::new();
    for (name, service) in services {
        let name = name.as_str().unwrap_or("?");
        assert_eq!(
            service["image"].as_str(),
            Some("redis:7.0.15"),
            "{name}: image"
        );
        let command = strings(&service["command"]);
        let joined = command.join(" ");
        assert!(
            command.windows(2).any(|w| w == ["--save", ""]),
            "{name}: RDB snapshots must be off: {joined}"
        );
        assert!(
            command.windows(2).any(|w| w == ["--appendonly", "no"]),
            "{name}: AOF off: {joined}"
        );
        assert!(
            command
                .windows(2)
                .any(|w| w == ["--maxmemory-policy", "noeviction"]),
            "{name}: {joined}"
        );
        let check = strings(&service["healthcheck"]["test"]);
        assert!(
            check.contains(&"ping"),
            "{name}: healthcheck pings: {check:?}"
        );
        let ports = strings(&service["ports"]);
        assert_eq!(ports.len(), 1, "{name}: one port");
        let (host, container) = ports[0].rsplit_once(':').expect("host:container");
        assert_eq!(container, "6379", "{name}");
        assert!(
            host.starts_with("127.0.0.1:"),
            "{name}: bound to loopback only: {host}"
        );
        host_ports.push(host.to_owned());
    }
    host_ports.sort();
    let expected: Vec<String> = (7001..=7005).map(|p| format!("127.0.0.1:{p}")).collect();
    assert_eq!(host_ports, expected);
}

#[test]
fn readme_nodes_are_the_compose_nodes() {
    let doc = compose();
    let mut compose_urls: Vec<String> = doc["services"]
        .as_hash()
        .expect("services")
        .values()
        .map(|s| {
            let port = strings(&s["ports"])[0]
                .rsplit_once(':')
                .map(|(h, _)| h.to_owned());
            format!("redis://{}", port.unwrap_or_default())
        })
        .collect();
    compose_urls.sort();
    let mut readme = readme_nodes();
    readme.sort();
    assert_eq!(readme, compose_urls);
}
