"""Symmetrisation heuristics on hand-made link sets with answers worked out by hand
(Koehn's pseudo-code; links are (source, target))."""

from __future__ import annotations

import numpy as np
import pytest

from nmt.core.errors import NMTError
from nmt.data.symmetrize import HEURISTICS, agreement, flip_links, symmetrize

# 4 x 4 pair. Both directions agree on the diagonal 0-0, 1-1, 2-2; the forward model also
# links source 3 to target 2, the backward one source 0 to target 3.
#   (3, 2) neighbours (2, 2) and source 3 is unaligned -> grow-diag adds it;
#   (0, 3) neighbours no alignment point -> only FINAL can add it: source 0 is aligned
#   but target 3 is not, so FINAL ("or") adds it and FINAL-AND ("and") does not.
FORWARD = {(0, 0), (1, 1), (2, 2), (3, 2)}
BACKWARD = {(0, 0), (1, 1), (2, 2), (0, 3)}
DIAGONAL = {(0, 0), (1, 1), (2, 2)}
EXPECTED = {
    "intersection": DIAGONAL,
    "union": DIAGONAL | {(3, 2), (0, 3)},
    "grow-diag": DIAGONAL | {(3, 2)},
    "grow-diag-final": DIAGONAL | {(3, 2), (0, 3)},
    "grow-diag-final-and": DIAGONAL | {(3, 2)},
}


@pytest.mark.parametrize("heuristic", HEURISTICS)
def test_every_heuristic_on_a_hand_made_pair(heuristic):
    assert symmetrize(FORWARD, BACKWARD, 4, 4, heuristic) == EXPECTED[heuristic]


def test_final_and_differs_from_final_only_where_one_word_is_already_aligned():
    gdf = symmetrize(FORWARD, BACKWARD, 4, 4, "grow-diag-final")
    gdfa = symmetrize(FORWARD, BACKWARD, 4, 4, "grow-diag-final-and")
    assert gdf - gdfa == {(0, 3)} and gdfa <= gdf


def test_final_and_adds_a_link_whose_words_are_both_unaligned():
    # 5 x 5: (4, 4) is no neighbour of anything ((3, 2) is two targets away) and both of
    # its words are unaligned, so both FINAL variants add it; grow-diag does not.
    forward = FORWARD | {(4, 4)}
    assert (4, 4) not in symmetrize(forward, BACKWARD, 5, 5, "grow-diag")
    assert symmetrize(forward, BACKWARD, 5, 5, "grow-diag-final-and") == DIAGONAL | {(3, 2),
                                                                                    (4, 4)}
    assert symmetrize(forward, BACKWARD, 5, 5, "grow-diag-final") == DIAGONAL | {
        (3, 2), (0, 3), (4, 4)}


def test_grow_diag_uses_diagonal_neighbours_and_keeps_growing():
    # Only 0-0 is in both; 1-1, 2-2, 3-3 form a diagonal chain from it in the union.
    chain = {(1, 1), (2, 2), (3, 3)}
    assert symmetrize({(0, 0)} | chain, {(0, 0)}, 4, 4, "grow-diag") == {(0, 0)} | chain


@pytest.mark.parametrize("step", [(-1, 0), (0, -1), (1, 0), (0, 1),
                                  (-1, -1), (-1, 1), (1, -1), (1, 1)])
def test_grow_diag_reaches_each_of_the_eight_neighbours(step):
    # 1-1 is in both directions; the union's one other link is its neighbour by `step`,
    # with both words unaligned: grow-diag adds it, whichever way it lies.
    neighbour = (1 + step[0], 1 + step[1])
    assert symmetrize({(1, 1), neighbour}, {(1, 1)}, 3, 3, "grow-diag") == {(1, 1), neighbour}


def test_final_and_needs_the_target_word_unaligned_too():
    # (2, 0) is no neighbour of 0-0; its source word is free, its target word is not.
    assert symmetrize({(0, 0), (2, 0)}, {(0, 0)}, 3, 3, "grow-diag-final-and") == {(0, 0)}
    assert symmetrize({(0, 0), (2, 0)}, {(0, 0)}, 3, 3, "grow-diag-final") == {(0, 0), (2, 0)}


def test_a_neighbour_whose_words_are_both_aligned_is_not_added():
    # (0, 1) neighbours 0-0 and 1-1, but source 0 and target 1 are both aligned already.
    forward, backward = {(0, 0), (1, 1), (0, 1)}, {(0, 0), (1, 1)}
    for heuristic in ("grow-diag", "grow-diag-final", "grow-diag-final-and"):
        assert symmetrize(forward, backward, 2, 2, heuristic) == {(0, 0), (1, 1)}
    assert symmetrize(forward, backward, 2, 2, "union") == forward


def test_grow_visits_edge_neighbours_before_diagonal_ones():
    # Only 0-0 is in both directions. Its edge neighbours (0, 1) and (1, 0) each have an
    # unaligned word when visited, so both are added; the diagonal (1, 1) comes after them
    # in NEIGHBOURS and by then both its words are aligned. (Diagonals first would give
    # {0-0, 1-1} instead: then neither edge neighbour has an unaligned word.)
    got = symmetrize({(0, 0), (1, 0), (1, 1)}, {(0, 0), (0, 1)}, 2, 2, "grow-diag")
    assert got == {(0, 0), (1, 0), (0, 1)}


def test_flip_and_empty_inputs():
    assert flip_links({(2, 0), (1, 3)}) == {(0, 2), (3, 1)}
    for heuristic in HEURISTICS:
        assert symmetrize(set(), set(), 3, 3, heuristic) == set()
        assert symmetrize({(1, 1)}, set(), 3, 3, heuristic) == (
            set() if heuristic in ("intersection", "grow-diag") else {(1, 1)})


def test_bad_heuristic_and_links_outside_the_sentence():
    with pytest.raises(NMTError, match="grow-diag-final-and"):
        symmetrize(FORWARD, BACKWARD, 4, 4, "grow")
    with pytest.raises(NMTError, match="outside a 3 x 4"):
        symmetrize(FORWARD, BACKWARD, 3, 4, "union")


def test_agreement_keeps_pairs_both_directions_weigh_and_many_to_one_pairs():
    # Forward rows (target words) sum to one, backward columns (source words) sum to one.
    # Target 0 is one word for sources 0 and 1 ("in front" -> "katan"): forward splits its
    # row over both, backward gives each source all its mass on target 0, so the geometric
    # means sqrt(0.5 * 1) = 0.71 keep both links, which no argmax direction gives. Target 1
    # is a particle the forward model spreads thinly; backward never picks it: no link.
    forward = np.array([[0.5, 0.5, 0.0], [0.3, 0.3, 0.4], [0.0, 0.1, 0.9]])
    backward = np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 0.05], [0.0, 0.0, 0.95]])
    mean, links = agreement(forward, backward, 0.2)
    assert links == {(0, 0), (1, 0), (2, 2)}
    assert mean[1, 2] == pytest.approx(np.sqrt(0.02)) and mean[0, 0] == pytest.approx(0.5 ** 0.5)
    assert agreement(forward, backward, 0.95)[1] == set()  # no pair reaches 0.95
    assert agreement(forward, backward, 0.14)[1] == links | {(2, 1)}  # sqrt(0.02) = 0.141


def test_agreement_refuses_a_threshold_outside_its_range_and_mismatched_maps():
    with pytest.raises(NMTError, match="agreement-threshold"):
        agreement(np.eye(2), np.eye(2), 0.0)
    with pytest.raises(ValueError, match="differ in shape"):
        agreement(np.eye(2), np.eye(3))
