"""bench/graph_bench.py's small-sample corpus (for a model-extracted graph)."""

from __future__ import annotations

from bench.graph_bench import Case, Dataset, sample


def test_sample_keeps_the_first_questions_their_gold_and_distractors_up_to_the_bound():
    documents = [{"text": f"text {i}", "source": f"doc:{i}", "title": f"T{i}"} for i in range(10)]
    cases = [Case("q0", ("0", "1"), ("all",)), Case("q1", ("2",), ("all",)), Case("q2", ("3",), ("all",))]
    dataset = Dataset("d", documents, cases, (("5", "6", "7"), ("8", "9"), ("4",)))
    small = sample(dataset, questions=2, documents=5)
    # gold documents of the first two questions first, then one distractor of each in turn
    assert [d["source"] for d in small.documents] == ["doc:0", "doc:1", "doc:2", "doc:5", "doc:8"]
    assert [c.text for c in small.cases] == ["q0", "q1"]
    assert small.name == "d-sample2"
    tight = sample(dataset, questions=2, documents=2)
    assert [c.text for c in tight.cases] == ["q0"]  # a question whose gold did not fit is left out
