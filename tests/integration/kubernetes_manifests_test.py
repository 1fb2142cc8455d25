# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""Checks deploy/kubernetes/ against the Kubernetes API schemas.

Every manifest is validated strictly (unknown fields are errors) with
kubernetes-validate, which bundles the OpenAPI schemas of each Kubernetes
release, against the oldest release the docs promise and the newest one
bundled. Then what the files must agree on: the socket directory, the
admin socket kept out of every directory a client pod mounts (and named by
the probes), the client socket's group, the metrics port, hostPID, the
Service's selector, the image's paths and names and the kustomization's
files.

Usage: kubernetes_manifests_test.py SOURCE_DIR [PYTHON...]
Exits 77 (skipped) when no Python given (this one, then each PYTHON that
exists) has kubernetes_validate: `pip install kubernetes-validate`
(scripts/test installs it into build/python-venv).
"""

import glob
import os
import re
import sys

OLDEST = "1.29.0"  # docs/deployment.md: Kubernetes 1.29 or later
# APIs newer than OLDEST, allowed under optional/ only (kustomization.yaml
# stays applicable to OLDEST): each is validated from the release that
# made it GA.
NEWER_APIS = {
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"): "1.30.0",
    ("admissionregistration.k8s.io/v1",
     "ValidatingAdmissionPolicyBinding"): "1.30.0",
}
SKIPPED = 77


def find_validator():
    try:
        import kubernetes_validate  # noqa: F401
        import yaml  # noqa: F401

        return True
    except ImportError:
        pass
    # Another interpreter (the test venv) may have it; it gets no list of
    # its own, so it does not look further.
    for python in sys.argv[2:]:
        if os.access(python, os.X_OK):
            probe = os.system(
                f"'{python}' -c 'import kubernetes_validate, yaml' 2>/dev/null"
            )
            if probe == 0:
                os.execv(python, [python, sys.argv[0], sys.argv[1]])
    return False


def load(directory):
    import yaml

    documents = {}
    for path in sorted(glob.glob(os.path.join(directory, "**", "*.yaml"),
                                 recursive=True)):
        with open(path) as file:
            documents[path] = [d for d in yaml.safe_load_all(file) if d]
    return documents


def main():
    source = sys.argv[1]
    if not find_validator():
        print("kubernetes-validate is not installed (pip install "
              "kubernetes-validate; scripts/test puts it in "
              "build/python-venv); skipped")
        return SKIPPED
    import kubernetes_validate
    from kubernetes_validate import utils

    newest = utils.latest_version()
    directory = os.path.join(source, "deploy", "kubernetes")
    documents = load(directory)
    errors = []
    by_kind = {}
    for path, docs in documents.items():
        name = os.path.relpath(path, source)
        for doc in docs:
            kind = doc.get("kind", "?")
            api = doc.get("apiVersion", "?")
            if api.startswith("kustomize.config.k8s.io/"):
                for resource in doc.get("resources", []):
                    if not os.path.exists(os.path.join(directory, resource)):
                        errors.append(f"{name}: resource {resource} does "
                                      "not exist")
                continue
            if api.startswith("monitoring.coreos.com/"):
                # A CRD: no schema in Kubernetes; kept out of the
                # kustomization.
                if "/optional/" not in path:
                    errors.append(f"{name}: {kind} needs the Prometheus "
                                  "Operator; keep it under optional/")
                print(f"{name}: {kind} ({api}): a CRD, schema not checked")
                continue
            oldest = NEWER_APIS.get((api, kind), OLDEST)
            if oldest != OLDEST and "/optional/" not in path:
                errors.append(f"{name}: {kind} ({api}) needs Kubernetes "
                              f"{oldest}; keep it under optional/")
            for version in (oldest, newest):
                try:
                    kubernetes_validate.validate(doc, version, strict=True)
                except (kubernetes_validate.ValidationError,
                        kubernetes_validate.SchemaNotFoundError,
                        kubernetes_validate.InvalidSchemaError) as error:
                    errors.append(f"{name}: {kind} against Kubernetes "
                                  f"{version}: {error}")
            by_kind.setdefault(kind, []).append(doc)
            print(f"{name}: {kind} {doc['metadata']['name']}: valid "
                  f"(Kubernetes {oldest} and {newest}, strict)")

    def single(kind):
        found = by_kind.get(kind, [])
        if len(found) != 1:
            errors.append(f"expected one {kind}, found {len(found)}")
            return None
        return found[0]

    daemonset = single("DaemonSet")
    deployment = single("Deployment")
    service = single("Service")
    config_map = single("ConfigMap")
    namespace = single("Namespace")
    if not all((daemonset, deployment, service, config_map, namespace)):
        return fail(errors)
    # hostPID and hostPath are refused at Pod Security's baseline, which
    # clusters may enforce by default: halod's namespace says privileged.
    if daemonset["metadata"].get("namespace") != namespace["metadata"]["name"]:
        errors.append("DaemonSet: not in the Namespace the manifests make")
    enforce = namespace["metadata"].get("labels", {}).get(
        "pod-security.kubernetes.io/enforce")
    if enforce != "privileged":
        errors.append("Namespace: pod-security.kubernetes.io/enforce is "
                      f"{enforce!r}, not 'privileged' (halod needs hostPID "
                      "and a hostPath)")
    config = dict(
        (key.strip(), value.strip())
        for key, _, value in (
            line.partition("=")
            for line in config_map["data"]["halod.conf"].splitlines()
            if "=" in line and not line.lstrip().startswith("#")))

    def host_paths(pod):
        return {v["name"]: v["hostPath"]["path"]
                for v in pod["spec"].get("volumes", []) if "hostPath" in v}

    def mounts(pod):
        container = pod["spec"]["containers"][0]
        return {m["mountPath"]: m["name"]
                for m in container.get("volumeMounts", [])}

    halod_pod = daemonset["spec"]["template"]
    client_pod = deployment["spec"]["template"]
    listen = config.get("listen", "")
    socket_dir = os.path.dirname(listen.removeprefix("ipc://"))
    for label, pod in (("DaemonSet", halod_pod), ("Deployment", client_pod)):
        volume = mounts(pod).get(socket_dir)
        if host_paths(pod).get(volume) != socket_dir:
            errors.append(f"{label}: {socket_dir} (listen = {listen}) is "
                          "not the node's hostPath of the same name")
    # The admin socket: in a directory halod's pod mounts and no client pod
    # does (root of a client pod could otherwise run haloctl drain or
    # kill-client against every tenant), and the one the probes ask.
    admin = config.get("admin", "")
    admin_dir = os.path.dirname(admin.removeprefix("ipc://"))
    halod_volumes = {v["name"]: v
                     for v in halod_pod["spec"].get("volumes", [])}
    admin_volume = halod_volumes.get(mounts(halod_pod).get(admin_dir))
    client_dirs = (set(mounts(client_pod)) |
                   set(host_paths(client_pod).values()))
    if not admin.startswith("ipc://") or not admin_volume:
        errors.append(f"DaemonSet: admin = {admin}: its directory is not a "
                      "volume mounted in halod's pod")
    elif any(admin_dir == d or admin_dir.startswith(d.rstrip("/") + "/")
             for d in client_dirs) or (
                 "hostPath" in admin_volume and
                 admin_volume["hostPath"]["path"] in client_dirs):
        errors.append(f"ConfigMap: admin = {admin} is in a directory client "
                      "pods mount")
    client_env = {e["name"]: e.get("value")
                  for e in client_pod["spec"]["containers"][0].get("env", [])}
    if client_env.get("HALO_ADDRESS") != listen:
        errors.append(f"Deployment: HALO_ADDRESS {client_env.get('HALO_ADDRESS')}"
                      f" is not halod's listen = {listen}")
    group = config.get("socket-group", "")
    groups = client_pod["spec"].get("securityContext", {}).get(
        "supplementalGroups", [])
    if not group.isdigit() or int(group) not in groups:
        errors.append(f"Deployment: supplementalGroups {groups} lack the "
                      f"socket-group {group}")
    if not halod_pod["spec"].get("hostPID"):
        errors.append("DaemonSet: hostPID must be true (halod must see its "
                      "clients' pids)")
    if config.get("trust-domain") != "cgroup":
        errors.append("ConfigMap: trust-domain should be cgroup (pods of one "
                      "uid would share a device context)")
    # halod's pod runs as root, and a client pod's uid 0 is halod's uid to
    # native-code = owner: native code would run as root in halod's pod.
    if config.get("native-code") != "none":
        errors.append("ConfigMap: native-code should be none (a client pod "
                      "running as uid 0 could run native code as root in "
                      "halod's pod)")
    port = re.fullmatch(r".*:(\d+)", config.get("metrics-address", ""))
    ports = {p["name"]: p["containerPort"]
             for p in halod_pod["spec"]["containers"][0].get("ports", [])}
    service_ports = {p["name"]: p for p in service["spec"]["ports"]}
    if not port or ports.get("metrics") != int(port.group(1)):
        errors.append(f"DaemonSet: containerPort metrics {ports.get('metrics')}"
                      " is not metrics-address's port")
    elif service_ports.get("metrics", {}).get("port") != int(port.group(1)):
        errors.append("Service: port metrics is not metrics-address's port")
    labels = halod_pod["metadata"]["labels"]
    if any(labels.get(k) != v for k, v in service["spec"]["selector"].items()):
        errors.append("Service: its selector does not select halod's pods")
    # The image's paths (deploy/container/halod.Containerfile).
    with open(os.path.join(source, "deploy", "container",
                           "halod.Containerfile")) as file:
        containerfile = file.read()
    prefix = re.search(r"^ARG PREFIX=(\S+)", containerfile, re.M)
    command = re.search(r"^CMD \[(.*?)\]", containerfile, re.M | re.S)
    if not command or not re.search(r'"--native-code",\s*"none"',
                                    command.group(1)):
        errors.append("halod.Containerfile: its CMD should pass "
                      "--native-code none (halod runs as root there)")
    for probe in ("startupProbe", "livenessProbe"):
        command = halod_pod["spec"]["containers"][0][probe]["exec"]["command"]
        if not prefix or not command[0].startswith(prefix.group(1) + "/bin/"):
            errors.append(f"DaemonSet: {probe} runs {command[0]}, not in the "
                          "image's PREFIX/bin")
        flags = dict((flag, value) for flag, value in zip(command, command[1:])
                     if flag.startswith("--"))
        if flags.get("--admin") != admin:
            errors.append(f"DaemonSet: {probe} does not pass --admin {admin}")
        # haloctl must give up before the kubelet does (its default
        # --timeout is 5000 ms; a probe's timeoutSeconds defaults to 1).
        timeout_ms = flags.get("--timeout", "5000")
        probe_s = halod_pod["spec"]["containers"][0][probe].get(
            "timeoutSeconds", 1)
        if not timeout_ms.isdigit() or int(timeout_ms) >= probe_s * 1000:
            errors.append(f"DaemonSet: {probe}: haloctl --timeout "
                          f"{timeout_ms} ms is not below timeoutSeconds "
                          f"{probe_s}")
    # system-node-critical outside kube-system: a ResourceQuota in halod's
    # namespace whose PriorityClass scope covers its class (clusters that
    # limit the critical classes admit the pods only then).
    priority = halod_pod["spec"].get("priorityClassName")
    if priority:
        covered = False
        for quota in by_kind.get("ResourceQuota", []):
            if quota["metadata"].get("namespace") != \
                    daemonset["metadata"].get("namespace"):
                continue
            for match in quota["spec"].get("scopeSelector", {}).get(
                    "matchExpressions", []):
                if (match.get("scopeName") == "PriorityClass" and
                        match.get("operator") == "In" and
                        priority in match.get("values", [])):
                    covered = True
        if not covered:
            errors.append(f"DaemonSet: priorityClassName {priority} has no "
                          "ResourceQuota with a PriorityClass scope for it "
                          "in halod's namespace")
    # The client namespaces' policy (optional/): its binding names it, and
    # the one hostPath it lets client pods have is the socket directory.
    policies = {p["metadata"]["name"]: p
                for p in by_kind.get("ValidatingAdmissionPolicy", [])}
    for binding in by_kind.get("ValidatingAdmissionPolicyBinding", []):
        if binding["spec"].get("policyName") not in policies:
            errors.append(f"ValidatingAdmissionPolicyBinding "
                          f"{binding['metadata']['name']}: no policy "
                          f"{binding['spec'].get('policyName')}")
    for policy in policies.values():
        rules = " ".join(v["expression"]
                         for v in policy["spec"].get("validations", []))
        if "hostPath" in rules and f"'{socket_dir}'" not in rules:
            errors.append(f"ValidatingAdmissionPolicy "
                          f"{policy['metadata']['name']}: its hostPath rule "
                          f"does not name the socket directory {socket_dir}")
    # The images are the ones the Containerfiles say to build (`-t NAME`),
    # under some registry, with a tag.
    for label, pod, file in (("DaemonSet", halod_pod, "halod.Containerfile"),
                             ("Deployment", client_pod,
                              "client.Containerfile")):
        with open(os.path.join(source, "deploy", "container", file)) as f:
            built = re.search(r"^#\s+podman build .* -t (\S+) \.$", f.read(),
                              re.M)
        image = pod["spec"]["containers"][0]["image"]
        if not built or not re.fullmatch(
                r"(.+/)?" + re.escape(built.group(1)) + r":[\w.-]+", image):
            errors.append(f"{label}: image {image} is not the {file} image "
                          f"({built.group(1) if built else '?'}) with a tag")
    return fail(errors)


def fail(errors):
    for error in errors:
        print("FAILED:", error)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
