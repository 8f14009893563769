"""Several packages moved: the package sets tried and whose move a cell is blamed on."""

from __future__ import annotations

from harness.bisect.culprit import bad_set, blame, good_set, with_version
from harness.bisect.search import Judgement, Verdict
from harness.bisect.versions import Move

MOVES = (Move("onnxscript", "0.6.2", "0.7.2"), Move("onnx-ir", "0.1.12", "1.1.0"))


def test_the_sets_keep_every_other_package_at_its_good_version() -> None:
    assert good_set(MOVES) == ("onnxscript==0.6.2", "onnx-ir==0.1.12")
    assert bad_set(MOVES) == ("onnxscript==0.7.2", "onnx-ir==1.1.0")
    assert with_version(MOVES, "onnx-ir", "1.0.0") == ("onnxscript==0.6.2", "onnx-ir==1.0.0")


def test_one_package_is_the_culprit_without_a_run() -> None:
    (move,) = MOVES[:1]
    assert blame((move,), {}, ["cell"])["cell"].package == "onnxscript"


def test_the_package_whose_move_alone_reproduces_it_is_blamed() -> None:
    alone = {
        "onnxscript": {"a": Verdict("0.7.2", Judgement.GOOD), "b": Verdict("0.7.2", Judgement.BAD)},
        "onnx-ir": {"a": Verdict("1.1.0", Judgement.BAD), "b": Verdict("1.1.0", Judgement.BAD)},
    }
    blames = blame(MOVES, alone, ["a", "b"])
    assert blames["a"].package == "onnx-ir" and blames["a"].also == ()
    # both moves alone break b: the first named is bisected, the other is reported
    assert blames["b"].package == "onnxscript" and blames["b"].also == ("onnx-ir",)
    assert blames["b"].reason == "onnxscript alone at its bad version reproduces it"


def test_no_single_move_means_no_culprit_and_says_which_were_not_tried() -> None:
    alone = {
        "onnxscript": {"a": Verdict("0.7.2", Judgement.GOOD)},
        "onnx-ir": {"a": Verdict("1.1.0", Judgement.SKIP, "does not import")},
    }
    found = blame(MOVES, alone, ["a"])["a"]
    assert found.package is None
    assert found.reason == (
        "no package alone at its bad version reproduces it: it takes several moves together"
        " (not tried alone: onnx-ir)"
    )
