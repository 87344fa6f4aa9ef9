"""One number per concept (issue 15): every figure the profile page shows is the API's, for the demo run and
for real samples (an Ascend CNN training rank and an A100 Kineto trace), taken through the real diagnose step.

The page's numbers row, its "Where the time goes" table, each finding's time share / saving / speedup /
replayed saving, and the metrics table are parsed from the HTML and compared with
``GET /api/profiles/{id}/findings/`` at the precision the page prints (times through the one duration filter,
pypto_core/durations.py)."""

from __future__ import annotations

import html as htmllib
import re

import pytest
from django.template.defaultfilters import floatformat

from pypto_core.durations import format_duration
from tests.paths import HAVE_SAMPLES, MISSING_SAMPLES, REPO, SAMPLES
from tests.web.helpers import project_with
from tests.web.test_pages import analysed_profile
from tests.web.test_time_breakdown import BUCKETS, _table

pytestmark = pytest.mark.django_db
from pypto_core import formats  # noqa: E402


def _demo(tmp_path):
    from pypto_core.synth import demo_pair

    before, _ = demo_pair(tmp_path / "demo")
    return formats.open_profiles(before).primary()


CASES = {
    "demo": _demo,
    "cnn_ascend_training": lambda tmp: formats.open_profiles(
        SAMPLES / "ascend_pt/cnn_8npu_text_level2/rank0_ascend_pt").primary(),
    "a100_kineto": lambda tmp: formats.open_profiles(SAMPLES / "kineto/a100_nccl_2rank").primary(),
    # our own H200 capture (tests/data): a CUDA-graph decode, one token a replayed step, no batch recorded
    "h200_cuda_graph": lambda tmp: formats.open_profiles(
        REPO / "tests/data/h200_decode/cuda_graph.pt.trace.json.gz").primary(),
    # and its prefill: no tokens, its MFU the headline
    "h200_prefill": lambda tmp: formats.open_profiles(
        REPO / "tests/data/h200_decode/prefill.pt.trace.json.gz").primary(),
    # a transformer's training rank without host API calls: dynamic kernels with nothing measured against them
    "qwen3_ascend_training": lambda tmp: formats.open_profiles(
        SAMPLES / "ascend_pt/qwen3_0.6b_train_4npu_level2").primary(),
    # a device with no known peaks (its profile page answered 500)
    "mi250_kineto": lambda tmp: formats.open_profiles(SAMPLES / "kineto/mi250_rocm").primary(),
}
OWN_DATA = ("demo", "h200_cuda_graph", "h200_prefill")


def _number(html: str, label: str) -> str:
    m = re.search(r'<div class="n"[^>]*><b>([^<]*)</b><span>' + re.escape(label), html)
    assert m, label
    return htmllib.unescape(m.group(1)).strip()


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_number_on_the_page_is_the_apis(case, client, make_user, tmp_path, settings) -> None:
    if case not in OWN_DATA and not HAVE_SAMPLES:  # pragma: no cover
        pytest.skip(MISSING_SAMPLES)
    settings.PYPTO_WORK_DIR = tmp_path / "work"
    owner = make_user("owner")
    p = analysed_profile(project_with(owner), owner, CASES[case](tmp_path), tmp_path, case)
    client.force_login(owner)
    api = client.get(f"/api/profiles/{p.pk}/findings/").json()
    prof = api["profile"]
    page = client.get(f"/profiles/{p.pk}/").content.decode()

    assert _number(page, "Kernels") == str(prof["kernel_count"])
    # every warning the API gives is on the page: the MI250 trace's says why a run 93% host launch bound
    # has no finding (host_bound_gaps could not judge 16 kernels)
    page_text = htmllib.unescape(page)
    assert all(w in page_text for w in api["warnings"]), api["warnings"]
    assert (case == "mi250_kineto") == any("could not judge" in w for w in api["warnings"])
    # the decode chart only where the run decodes: a training rank shows its metrics under their own heading
    assert ("Decode: per-token latency" in page) == bool(prof.get("decode", {}).get("steps"))
    # rounded as the page rounds (Django's floatformat: half up on the decimal value)
    speedup = floatformat(api["estimated_combined_speedup"], 2)
    assert _number(page, "Estimated speedup if all fixed") == f"{speedup}×"
    per_token = prof["metrics"]["per_token_latency_ms"]
    # inference-only numbers only where the run decodes (a training rank showed "Per-token latency —")
    if per_token:
        assert _number(page, "Per-token latency (p50)") == format_duration(per_token, "ms")
    has_tokens = bool(per_token or prof.get("decode", {}).get("tokens") or prof.get("decode", {}).get(
        "tokens_per_s"))
    assert ("Per-token latency (p50)" in page) == has_tokens
    assert ("<span>Tokens/s</span>" in page) == has_tokens
    assert has_tokens == (case in ("demo", "h200_cuda_graph"))
    # a run's speed where no tokens are counted: its median step, the figure the API gives
    step_time = prof["metrics"]["step_time_ms"]
    assert ("Step time (p50)" in page) == bool(step_time and not per_token)
    if step_time and not per_token:
        assert _number(page, "Step time (p50)") == format_duration(step_time, "ms")
    # a CUDA-graph decode: one token a replayed step, so a per-token latency, but no batch recorded, so no
    # tokens/s (its steps are known, not how many sequences each ran)
    if case == "h200_cuda_graph":
        assert per_token and prof["decode"]["batch"] == 0 and prof["decode"]["tokens"] is None
        assert _number(page, "Tokens/s") == "—" and prof["metrics"]["tokens_per_s"] is None
    assert ('id="no-batch"' in page) == (case == "h200_cuda_graph")
    # a prefill's or a training step's MFU, where the shapes give the MatMuls' FLOPs: the API's figure
    mfu = prof["metrics"]["mfu"]
    assert ('id="mfu"' in page) == (mfu is not None)
    assert (case in ("h200_prefill", "qwen3_ascend_training")) == (mfu is not None)  # a transformer step
    if mfu is not None:
        assert _number(page, "MFU") == f"{100 * mfu:.1f}%"
    prefill_rate = prof["metrics"]["prefill_tokens_per_s"]
    assert ('id="prefill-throughput"' in page) == bool(prefill_rate)
    if prefill_rate:
        assert _number(page, "Prefill tokens/s") == floatformat(prefill_rate, "0g")

    table = _table(page)  # the time attribution, bucket by bucket
    tb = prof["time_breakdown"]
    for b in BUCKETS:
        assert table[b][0] == tb[b] and table[b][1] == format_duration(tb[b])
    # a rank without host calls (the Qwen export has no trace_view.json) does not measure the host's buckets:
    # their 0 is said to be unmeasured under the table
    assert prof["host_calls_recorded"] == (case != "qwen3_ascend_training"), case
    assert ('id="time-no-host"' in page) == (not prof["host_calls_recorded"])

    shown = re.findall(r'<article class="finding" data-rule="([a-z_]+)"[^>]*>.*?<p class="hint">([^<]*)</p>',
                       page, re.S)
    by_rule = {f["rule"]: f for f in api["findings"]}
    assert [r for r, _ in shown] == [f["rule"] for f in api["findings"]]  # same findings, same order
    for rule, hint in shown:
        f = by_rule[rule]
        if not f["estimated_saving_us"] and not f["time_share"] and not f["peer_wait_us"]:
            # nothing measured against it (an Ascend run's dynamic kernels with no compile recorded): said so,
            # never "Time share 0.0% · estimated saving 0 µs · 1.00×"
            assert hint == "No time measured against it in this profile", (rule, hint)
            continue
        nums = re.findall(r"[\d.]+", hint.replace(",", ""))
        assert hint.startswith("Time share ") and nums[0] + "%" in hint  # a share reads as a percent
        assert float(nums[0]) / 100 == pytest.approx(f["time_share"], abs=0.0005)
        if not f["estimated_saving_us"] and f["peer_wait_us"]:
            # nothing to save here, only a wait on another rank: said so, without a 1.000x speedup, and where
            # the fix is: a pipeline's schedule (its waits are sends and receives) or the late rank
            pipeline = (prof.get("peer_wait") or {}).get("fix_on") == "pipeline_schedule"
            where = "is in the pipeline schedule" if pipeline else "is on the late rank"
            assert f"No saving on this rank: the fix {where}" in hint, (rule, hint)
            assert "estimated saving" not in hint and "speedup" not in hint, (rule, hint)
            continue
        saving = re.escape(format_duration(f["estimated_saving_us"], "us"))
        steps = prof["step_count"]
        if steps and steps > 1 and f["estimated_saving_us"]:  # the run's saving, then a step's
            per_step = re.escape(format_duration(f["estimated_saving_us"] / steps, "us"))
            saving += rf" \({per_step} a step, over {steps} steps\)"
        assert re.search(rf"estimated saving(, at most)? {saving} · ", hint), (rule, hint)
        speedup = re.search(r"estimated speedup ([\d.]+)×", hint)
        # as the page rounds (half up: 1.3355 reads 1.336, a float compare at 0.0005 fails on the tie)
        # as the headline rounds it (10.967 read 10.967× here and 10.97× on the card)
        assert speedup and speedup.group(1) == floatformat(f["estimated_speedup"], 2)
        alone = f["details"].get("replayed_alone_us")
        beyond = f["details"].get("replayed_beyond_bucket_us")
        model = f["details"].get("saving_model_us")
        after = f["details"].get("replayed_after_others_us")
        if after is not None:
            # alone the fix waits on another bottleneck: what it adds once the others are fixed ends the line
            suffix = f" · {format_duration(after, 'us')} once the other findings are fixed"
            assert hint.endswith(suffix), (rule, hint)
            hint = hint.removesuffix(suffix)
        if model is not None:
            # the replay raised an upper bound's saving: the saving model's own figure closes the line
            suffix = f" · by the saving model {format_duration(model, 'us')}"
            assert hint.endswith(suffix), (rule, hint)
            hint = hint.removesuffix(suffix)
        if alone is not None and beyond:
            # a replayed fix that closes more than the finding's own bucket says how much more
            assert hint.endswith(f"saved when replayed alone {format_duration(alone, 'us')} "
                                 f"({format_duration(beyond, 'us')} of it beyond the time this finding "
                                 "explains: the fix also closes idle time filed under other causes)"), (
                rule, hint)
        elif alone is not None:
            assert hint.endswith(f"saved when replayed alone {format_duration(alone, 'us')}"), (rule, hint)
        assert ("estimated saving, at most" in hint) == (f["saving_bound"] == "upper_bound"), rule
    # the wait for other ranks: the API's figure, shown beside the finding, never in its saving
    waits = {}
    for article in page.split('<article class="finding" data-rule="')[1:]:
        body = article.split("</article>")[0]
        wait = re.search(r'<p class="hint peer-wait">Wait for other ranks: ([^<]+?)\. Only a fix', body)
        if wait:
            waits[article.split('"')[0]] = wait.group(1)
            # where to look next: the cluster page (a slow-rank finding exists only in multi-rank uploads)
            assert f'href="/profiles/{p.pk}/cluster/"' in body
    assert waits == {f["rule"]: format_duration(f["peer_wait_us"], "us")
                     for f in api["findings"] if f["peer_wait_us"]}
    # the run's wait for other ranks leads the page, above the findings: the API's one figure
    pw = prof.get("peer_wait") or {}
    headline = re.search(r'<div class="peer-wait-headline" id="peer-wait-headline"[^>]*>\s*<p><strong>'
                         r'This rank waits ([\d.,]+) ms \(([\d.,]+)% of the run\) in collectives for other '
                         r'ranks\.</strong>', page)
    assert bool(headline) == bool(pw.get("wait_us")), case
    # the Ascend training rank waits in collectives (its communication.json splits their time); the decode
    # demo has none, and the A100 trace's NCCL kernels do not tell transfer from waiting
    assert bool(headline) == (case in ("cnn_ascend_training", "qwen3_ascend_training"))
    if headline:
        assert headline.group(1) == floatformat(pw["wait_us"] / 1e3, 1)
        assert headline.group(2) == floatformat(100 * pw["share_of_run"], 1)
        assert page.index('id="peer-wait-headline"') < page.index('id="findings"')
        # the findings open with the same wait, which no saving counts, and where it is fixed; the findings
        # follow in the API's (the report's) order
        row = re.search(r'<p class="finding not-recoverable" id="not-recoverable"><strong>Not recoverable on '
                        r'this rank: ([\d.,]+) ms \(([\d.,]+)% of the run\) waiting in collectives', page)
        assert row and row.groups() == headline.groups()
        assert page.index('id="not-recoverable"') < page.index('<article class="finding"')
        from pypto_core.collective_wait import P2P_WAIT_SHARE

        # a pipeline's point-to-point waits are its bubble (the Qwen ranks'), a collective's a late rank
        fix = ("the pipeline schedule" if (pw.get("p2p_share") or 0) >= P2P_WAIT_SHARE
               else "the late rank")
        assert f"It goes with a fix on {fix}" in page.split('id="not-recoverable"')[1].split("</p>")[0]
        shown_rules = re.findall(r'<article class="finding" data-rule="([a-z_]+)"', page)
        assert shown_rules == [f["rule"] for f in sorted(api["findings"], key=lambda f: f["rank"])]
        # one rank uploaded: ask for the others, with the cluster page
        assert f'Upload every rank (<a href="/profiles/{p.pk}/cluster/">cluster page</a>)' in page
        for f in api["findings"]:  # a finding that reports a wait reports this one
            assert f["peer_wait_us"] in (0, pw["wait_us"])
        # how the figure is made, in the API's numbers: not-overlapped time x the share moving no data
        parts = {k: floatformat(v / 1e3, 1) for k, v in pw["collectives"].items()}
        exposed = floatformat(pw["communication_not_overlapped_us"] / 1e3, 1)
        how = (f"It is the {exposed} ms of communication not overlapped with compute times the "
               f"{round(100 * pw['waiting_share'])}% of the collectives' time that moves no data: notify "
               f"Wait {parts['wait']} ms and Idle {parts['idle']} ms of their {parts['elapse']} ms.")
        shown = re.search(r'id="peer-wait-how">([^<]*)', page)
        assert shown and shown.group(1) == how, shown and shown.group(1)
        # the wait's notify-Wait and Idle parts (the API's), and what Idle is: msprof's Wait is the main
        # stream's only
        idle = re.search(r'id="peer-wait-idle">([^<]*)', page)
        assert idle and idle.group(1).startswith(
            f"Of the {floatformat(pw['wait_us'] / 1e3, 1)} ms this rank waits, "
            f"{floatformat(pw['notify_wait_us'] / 1e3, 1)} ms is notify Wait on the "
            f"collectives' main stream and {floatformat(pw['idle_us'] / 1e3, 1)} ms their Idle"), (
                idle and idle.group(1))
    # a trace without input shapes (the A100's: profiled without record_shapes) says how to get a roofline,
    # not that the model has no MatMuls
    assert ('id="no-shapes"' in page) == (case in ("a100_kineto", "h200_cuda_graph")), case
    # a graph replay records no shapes whatever the profiler's options: not told to set record_shapes
    assert ("replayed from a captured graph" in page) == (case == "h200_cuda_graph"), case
    # roofline points above the HBM roof are said to be in L2 (the CNN rank's two weight gradients)
    above = re.search(r'<p class="hint small" id="roofline-above">(\d+) points \(drawn as diamonds\) run '
                      r'above the HBM roof: their tensors stayed in the L2 cache', page)
    assert bool(above) == (case == "cnn_ascend_training"), case
    if above:
        assert above.group(1) == "2" and "L2 on this part: 192 MiB." in page
        assert "Huawei publishes no HBM bandwidth for this part" in page  # 910B3 assumed: third-party
    assert ('id="speedup-bound"' in page) == (api["combined_speedup_bound"] == "upper_bound")
    # a replayed headline says so: it is not the findings' own estimates combined (A100: 4.15x vs 3.957x)
    source = p.summary["report"]["profile"].get("combined_speedup_source")
    assert ('id="speedup-source"' in page) == (source == "replay")

    metrics = dict(re.findall(r'<tr data-metric="([a-z0-9_]+)"><td>.*?</td><td class="num">([^<]+)</td></tr>',
                              page))
    shown_metrics = {k: v for k, v in metrics.items() if k in prof["metrics"]}
    assert shown_metrics, "the metrics table is on the page"
    for k, v in shown_metrics.items():
        assert prof["metrics"][k] is not None, k  # a metric the workload has no use for is not shown
        assert float(v) == pytest.approx(prof["metrics"][k], abs=0.00005), k


@pytest.mark.skipif(not HAVE_SAMPLES, reason=MISSING_SAMPLES)
def test_a_finding_that_saves_nothing_here_points_at_the_late_rank(client, make_user, tmp_path,
                                                                   settings) -> None:
    """A finding whose saving on this rank is 0 but which carries a wait for other ranks read "estimated
    saving, at most 0 · estimated speedup 1.000×": it says instead that the fix is on the late rank."""
    settings.PYPTO_WORK_DIR = tmp_path / "work"
    owner = make_user("owner")
    p = analysed_profile(project_with(owner), owner, CASES["cnn_ascend_training"](tmp_path), tmp_path, "cnn")
    f = next(f for f in p.findings.all() if f.data.get("peer_wait_us"))
    f.data.update({"estimated_saving_us": 0.0, "estimated_speedup": 1.0})  # as a slow-rank finding on a peer
    f.data["details"].pop("replayed_alone_us", None)
    f.save(update_fields=["data"])
    client.force_login(owner)
    for lang, says in (("en", "No saving on this rank: the fix is on the late rank"),
                       ("zh-hans", "本 Rank 无节省：需在慢卡上修复")):
        client.post("/language/", {"language": lang, "next": "/"})
        page = client.get(f"/profiles/{p.pk}/").content.decode()
        article = page.split(f'data-finding-id="{f.pk}"')[1].split("</article>")[0]
        hint = re.search(r'<p class="hint">([^<]*)</p>', article).group(1)
        assert says in hint, hint
        assert "1.000×" not in hint and format_duration(0.0, "us") not in hint, hint


@pytest.mark.skipif(not HAVE_SAMPLES, reason=MISSING_SAMPLES)
def test_the_upload_page_names_the_rank_it_shows(client, make_user, tmp_path, settings) -> None:
    """A multi-rank upload's own row ("Rank: all (cluster)") shows its first readable rank's numbers: the page
    names that rank (the headline said "This rank"), and the selector lists the ranks 0, 1, 2, …, 10."""
    from profiles.models import Profile, ProfileStatus

    settings.PYPTO_WORK_DIR = tmp_path / "work"
    owner = make_user("owner")
    head = analysed_profile(project_with(owner), owner, CASES["cnn_ascend_training"](tmp_path), tmp_path,
                            "cnn")
    ranks = {}
    for r in (10, 2, 0, 1):  # created out of order; by name "rank 10" sorts before "rank 2"
        ranks[r] = Profile.objects.create(
            project=head.project, name=f"cnn · rank {r}", original_filename="p.zip", group=head, rank=r,
            status=ProfileStatus.FAILED if r == 0 else ProfileStatus.READY)  # rank 0 unread: rank 1 shown
    client.force_login(owner)
    page = client.get(f"/profiles/{head.pk}/").content.decode()
    selector = page.split('id="rank-selector"')[1].split("</nav>")[0]
    assert re.findall(r">(\d+)</a>", selector) == ["0", "1", "2", "10"]
    shown = re.search(r'<p class="hint" id="shown-rank">Rank (\d+) shown; see the <a href="([^"]+)">'
                      r'cluster page</a> for all ranks\.</p>', page)
    assert shown and shown.group(1) == "1" and shown.group(2) == f"/profiles/{head.pk}/cluster/"
    assert re.search(r"<strong>Rank 1 waits [\d.,]+ ms \([\d.,]+% of the run\) in collectives", page)
    assert "This rank waits" not in page
    # a rank's own page is that rank: no note, "This rank"
    rank_page = client.get(f"/profiles/{ranks[0].pk}/").content.decode()
    assert 'id="shown-rank"' not in rank_page
    client.post("/language/", {"language": "zh-hans", "next": "/"})
    page = client.get(f"/profiles/{head.pk}/").content.decode()
    assert "显示的是 Rank 1 的数据" in page and "Rank 1 在集合通信中等待" in page
