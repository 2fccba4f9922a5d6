"""observe/paste on pastes of the control-plane programs (etcdctl, kubectl, journalctl, systemctl), as
users put them in threads: prompts and command lines recorded, fences and grep separators undone, and the
program's output left for its parser."""

from __future__ import annotations

from clusterdoctor.observe.paste import clean, looks_pasted

# github.com/etcd-io/etcd/issues/15836 (root prompt, etcdctl with its flags)
ETCDCTL = (
    '[root@k8s-master ~]# /opt/ray/etcd/bin/etcdctl --cacert=/opt/ray/etcd/ssl/ca.pem --endpoints="https://'
    '192.168.1.153:2379" endpoint health\n'
    "https://10.50.32.153:2379 is healthy: successfully committed proposal: took = 23.34261ms\n"
)


def test_root_prompt_and_command_line_are_recorded():
    assert looks_pasted(ETCDCTL)
    p = clean(ETCDCTL)
    assert p.commands[0].startswith("/opt/ray/etcd/bin/etcdctl") and p.commands[0].endswith("endpoint health")
    assert (
        p.text == "https://10.50.32.153:2379 is healthy: successfully committed proposal: took = 23.34261ms\n"
    )
    assert p.origin == [2]


def test_dollar_prompt_kubectl_in_a_fence():
    text = "```\n$ kubectl get pod\nNAME   READY   STATUS    RESTARTS   AGE\nweb-0  1/1     Running   0          5m\n```\n"
    p = clean(text)
    assert p.commands == ["kubectl get pod"]
    assert p.text.splitlines()[0].startswith("NAME") and p.origin == [3, 4]


def test_bare_root_prompt_for_cluster_tools():
    for cmd in ("kubeadm certs check-expiration", "etcdutl snapshot status db", "crictl ps -a", "swapon -s"):
        p = clean(f"# {cmd}\nsome output\n")
        assert p.commands == [cmd], cmd


def test_comment_lines_are_not_prompts():
    p = clean(
        "# output\nalarm response alarms {\n  alarm: NOSPACE\n}\n"
    )  # github.com/etcd-io/jetcd/issues/90
    assert p.commands == [] and "# output" in p.text


def test_grep_context_separators_are_elisions():
    # `journalctl | grep -A1 PLEG`: groups separated by "--"
    text = (
        "Nov 08 16:25:22 node kubelet[29837]: I1108 16:25:22.761754   29837 kubelet.go:1758] skipping pod "
        "synchronization - [PLEG is not healthy: pleg was last seen active 3m4s ago; threshold is 3m0s]\n"
        "--\n"
        "Nov 08 16:30:22 node kubelet[29837]: I1108 16:30:22.761754   29837 kubelet.go:1758] skipping pod "
        "synchronization - [PLEG is not healthy: pleg was last seen active 8m4s ago; threshold is 3m0s]\n"
    )
    p = clean(text)
    assert p.elided == [(2, 2)] and p.gaps == [2] and len(p.text.splitlines()) == 2


# github.com/etcd-io/etcd/issues/9593 (the corpus case ok-ctrl-303): curl's progress meter, pasted with the
# output; the meter's last redraw and the first line of the output share a line
CURL = (
    " curl 127.0.0.1:2379/metrics | grep etcd_disk_\n"
    "  % Total    % Received % Xferd  Average Speed   Time    Time     Time  Current\n"
    "                                 Dload  Upload   Total   Spent    Left  Speed\n"
    "  0     0    0     0    0     0      0      0 --:--:-- --:--:-- --:--:--     0# HELP "
    "etcd_disk_backend_commit_duration_seconds The latency distributions of commit called by backend.\n"
    "# TYPE etcd_disk_backend_commit_duration_seconds histogram\n"
    'etcd_disk_backend_commit_duration_seconds_bucket{le="0.001"} 0\n'
)


def test_curl_progress_meter_is_undone():
    assert looks_pasted(CURL)
    p = clean(CURL)
    assert p.commands == ["curl 127.0.0.1:2379/metrics | grep etcd_disk_"]
    assert p.text.startswith("# HELP etcd_disk_backend_commit_duration_seconds The latency")
    assert p.origin == [4, 5, 6]
    assert any("curl progress meter" in u for u in p.undone)


def test_a_meter_without_its_header_is_output():
    text = "$ cat counts\n  0     0    0     0    0     0      0      0 --:--:-- --:--:-- --:--:--     0\n"
    assert clean(text).text.startswith("  0     0")


def test_prompt_hosts_are_recorded():
    # github.com/clustervision/trinity/issues/219 (corpus case rdma-304)
    p = clean(
        "[root@node045 ~]# ibstatus\nFatal error:  device '*': sys files not found (/sys/class/infiniband/*/ports)\n"
    )
    assert p.hosts == ["node045"]
    assert clean("kgk2@bock:~$ cat /proc/driver/nvidia/version\nNVRM version: x\n").hosts == ["bock"]
    assert clean("$ ibstat\nCA 'mlx5_0'\n").hosts == []
