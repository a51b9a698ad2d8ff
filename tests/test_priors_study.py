"""scripts/priors_study.py: the full runs' answers, built again from the data and checked
as `dcpmi verify` checks them, go into lm-eval's own answer cache, which then answers
those requests without the model; a tampered answer is refused."""

from __future__ import annotations

import gzip
import json
import shutil

import pytest
from helpers import ROOT, script

pytestmark = pytest.mark.usefixtures("data_dir")


def test_the_full_runs_answers_answer_lm_evals_cache_without_the_model(tmp_path):
    from lm_eval.api.instance import Instance
    from lm_eval.api.model import LM, CachingLM

    study = script("priors_study")
    chosen, found = study.answers("dcpmi_copa", 3)
    assert chosen == [0, 250, 499]  # --quick 3: the first, the middle, the last
    # two options a document, each after its premise and after the domain premise
    assert len(found) == 3 * 2 * 2
    (full,) = (ROOT / "results" / "full").glob("samples_dcpmi_copa_*.jsonl.gz")
    logged = [json.loads(line) for line in gzip.open(full, "rt")]
    assert sorted(ll for ll, _greedy in found.values()) == sorted(
        ll for s in logged if s["doc_id"] in chosen for ll, _greedy in s["filtered_resps"]
    )
    prefix = tmp_path / "answers"
    assert study.write_cache(prefix, found) == 12
    assert json.loads((tmp_path / "answers.dcpmi-model.json").read_text())["model"] == "hf-prefix"

    class NoModel(LM):  # any request the cache does not answer fails the test
        def loglikelihood(self, requests, disable_tqdm=False):
            raise AssertionError(f"{len(requests)} requests reached the model")

        loglikelihood_rolling = generate_until = loglikelihood

    pairs = list(found)
    requests = [Instance("loglikelihood", {}, pair, i) for i, pair in enumerate(pairs)]
    answered = CachingLM(NoModel(), f"{prefix}_rank0.db").loglikelihood(requests)
    assert [list(a) for a in answered] == [found[pair] for pair in pairs]


def test_an_answer_that_is_not_the_logged_documents_is_refused(tmp_path, monkeypatch):
    study = script("priors_study")
    full = tmp_path / "full"
    full.mkdir()
    (results,) = [
        p
        for p in (ROOT / "results" / "full").glob("results_*.json")
        if "dcpmi_copa" in json.loads(p.read_text())["results"]
    ]
    shutil.copy(results, full)
    (samples,) = (ROOT / "results" / "full").glob("samples_dcpmi_copa_*.jsonl.gz")
    lines = [json.loads(line) for line in gzip.open(samples, "rt")]
    first = lines[0]["filtered_resps"]
    first[0], first[1] = first[1], first[0]  # doc 0's options' answers swapped
    with gzip.open(full / samples.name, "wt") as out:
        out.writelines(json.dumps(line) + "\n" for line in lines)
    monkeypatch.setattr(study, "FULL", full)
    with pytest.raises(SystemExit) as stopped:
        study.answers("dcpmi_copa", 3)
    message = str(stopped.value)
    assert message.startswith("priors_study: the full run's answers do not check:\n")
    assert f"{full / samples.name} (dcpmi_copa): doc 0: acc recomputes to " in message
