"""The progress line's ETA: predicted seconds of what is left, corrected by what was measured."""

import io
import math

from transfer.search.progress import Progress


def test_eta_is_remaining_prediction_scaled_by_the_phase_measured_ratio():
    p = Progress("off")
    p.stage_start("validation", 0, 4, remaining_seconds=[(100.0, 0.0)])
    assert p.eta(0) == 100.0  # nothing measured yet: the prediction as it is
    p.trial_done(predicted=10.0, seconds=15.0)  # this phase runs 1.5× slower than its probe
    assert math.isclose(p.eta(1, remaining_seconds=[(90.0, 0.0)]), 135.0)


def test_eta_mixes_widths_by_their_own_predictions_not_an_average():
    p = Progress("off")
    # 1 narrow trial (5 s) and 1 wide one (40 s) left: the average of finished trials says nothing
    p.stage_start("validation", 2, 4, remaining_seconds=[(5.0, 0.0), (40.0, 0.0)])
    p.trial_done(predicted=5.0, seconds=5.0)
    assert math.isclose(p.eta(3, remaining_seconds=[(40.0, 0.0)]), 40.0)


def test_workers_share_the_remaining_work():
    p = Progress("off", workers=2)
    p.stage_start("lr", 0, 8, remaining_seconds=[(10.0, 0.0)] * 8)
    assert p.eta(0) == 40.0


def test_a_new_phase_forgets_the_ratio_a_grown_grid_keeps_it():
    p = Progress("off")
    p.stage_start("lr", 0, 2, remaining_seconds=[(10.0, 0.0)] * 2)
    p.trial_done(predicted=10.0, seconds=5.0)  # pruned: half the predicted time
    p.stage_start("lr", 1, 3, remaining_seconds=[(10.0, 0.0)] * 2)  # the same phase, grown
    assert p.ratio() == 0.5
    p.stage_start("validation", 0, 2, remaining_seconds=[(10.0, 0.0)] * 2)
    assert p.ratio() == 1.0


def test_copied_trials_do_not_move_the_ratio():
    p = Progress("off")
    p.stage_start("warmup", 0, 4, remaining_seconds=[(10.0, 0.0)] * 3)
    p.trial_done(predicted=0.0, seconds=0.0)  # the incumbent, copied from the previous stage
    assert p.ratio() == 1.0


def test_without_a_prediction_the_mean_pace_is_used():
    p = Progress("off")
    p.stage_start("lr", 0, 4)
    assert math.isnan(p.eta(0))
    p._t0 -= 10.0  # ten seconds into the phase, one trial done
    assert math.isclose(p.eta(1), 30.0, rel_tol=0.05)


def test_lines_print_the_eta():
    out = io.StringIO()
    p = Progress("lines", out)
    p.stage_start("lr", 0, 2, remaining_seconds=[(60.0, 0.0)] * 2)
    p.update(1, 2.5, {"lr": 0.01}, remaining_seconds=[(61.0, 0.0)])
    assert out.getvalue().splitlines()[-1] == "stage lr: 1/2 trials, best 2.5000 (lr=0.01), eta 1m01s"


class _Trial:
    def __init__(self, state, width, seconds=None, predicted=None):
        from optuna.trial import TrialState

        self.state = getattr(TrialState, state)
        self.params = {"width": width}
        self.system_attrs = {"fixed_params": {"width": width}}
        self.user_attrs = {"seconds": seconds, "predicted_seconds": predicted}
        self.datetime_start = None


class _Study:
    def __init__(self, trials):
        self.trials = trials

    def get_trials(self, deepcopy=False):
        return self.trials


def test_a_grids_remaining_time_follows_what_each_width_measured():
    """One noisy probe (width 256 priced at 2× what it takes) no longer decides the ETA once a
    trial of that width has run; before one has, the study's overall ratio stands in."""
    from transfer.search.probe import queued_trials

    predict = {64: 10.0, 256: 100.0}
    width = lambda p: p["width"]  # noqa: E731
    trials = [_Trial("COMPLETE", 64, 12.0, 10.0), _Trial("WAITING", 64), _Trial("WAITING", 256)]
    left = queued_trials(_Study(trials), lambda p: predict[p["width"]], key=width)
    assert left == [(1.2 * 10, 0.0), (1.2 * 100, 0.0)]  # 256 not measured yet: the overall ratio
    trials.append(_Trial("COMPLETE", 256, 50.0, 100.0))
    left = queued_trials(_Study(trials), lambda p: predict[p["width"]], key=width)
    assert left == [(1.2 * 10, 0.0), (0.5 * 100, 0.0)]
    assert queued_trials(_Study(trials), lambda p: predict[p["width"]]) == [(10, 0), (100, 0)]


def test_a_running_trial_counts_what_is_left_of_it_and_comes_first():
    from datetime import datetime, timedelta

    from transfer.search.probe import queued_trials

    running = _Trial("RUNNING", 256)
    running.datetime_start = datetime.now() - timedelta(seconds=30)
    left = queued_trials(_Study([_Trial("WAITING", 64), running]), lambda p: {64: 10.0, 256: 100.0}[p["width"]])
    assert [s for s, _ in left] == [100.0, 10.0]
    assert 29.0 < left[0][1] < 40.0 and left[1][1] == 0.0


def test_the_eta_is_the_makespan_of_what_is_left_on_the_workers():
    from transfer.search.progress import makespan

    assert makespan([10.0], 2) == 10.0  # one trial left is one trial long, not half of one
    assert makespan([10.0, 10.0, 10.0, 10.0], 2) == 20.0
    assert makespan([4.0, 10.0, 6.0], 2) == 10.0  # 6 goes to the worker freed at 4
    assert makespan([-3.0, 5.0], 1) == 5.0  # a trial past its prediction has nothing left
    p = Progress("off", workers=2)
    p.stage_start("batch_size", 1, 3, [(11.0, 6.0), (8.0, 0.0)])
    assert p.eta(1) == 8.0  # the running trial has 5 s left, the waiting one 8 s on the other
    p.trial_done(predicted=10.0, seconds=5.0)  # this phase's trials take half their prediction
    assert p.eta(2, remaining_seconds=[(11.0, 6.0)]) == 0.0


def test_the_eta_is_the_expected_makespan_over_what_the_pruner_may_cut():
    from transfer.search.progress import makespan, makespan_span

    def expected_makespan(trials, workers):
        return makespan_span(trials, workers).expected

    # the last round: two trials on two workers, each cut to 5 s with probability ½; the stage
    # ends at 10 s unless both are cut (¼): 8.75 s, not the 7.5 s of two trials of mean length
    assert expected_makespan([(10.0, 0.5, 5.0), (10.0, 0.5, 5.0)], 2) == 8.75
    assert makespan([7.5, 7.5], 2) == 7.5
    assert expected_makespan([(10.0, 0.0, 10.0), (4.0, 1.0, 2.0)], 1) == 12.0  # certain either way
    many = [(10.0, 0.5, 5.0)] * 14  # past the exact enumeration: sampled, from a fixed seed
    e = expected_makespan(many, 2)
    assert e == expected_makespan(many, 2) and 50.0 < e < 60.0  # 7 × 7.5 s each side, plus luck
    p = Progress("off", workers=2)
    p.stage_start("warmup", 1, 3, [(20.0, 6.0, 0.5, 5.0), (2.0, 0.0, 0.0, 2.0)])
    # the running trial is past the 5 s where the pruner would have cut it: it runs its 14 s
    # out (priced as still cuttable it would be 0 or 14 s left, and the ETA 8 s)
    assert p.eta(1) == 14.0
    p.stage_start("warmup", 1, 3, [(20.0, 3.0, 0.5, 5.0), (2.0, 0.0, 0.0, 2.0)])
    assert p.eta(1) == 0.5 * 17.0 + 0.5 * 2.0  # not yet at its cut point: 2 or 17 s left


def test_a_calibrated_remaining_time_is_not_scaled_twice():
    p = Progress("off", workers=2)
    p.stage_start("validation", 0, 4, [(50.0, 0.0)] * 2, calibrated=True)
    p.trial_done(10.0, 20.0)  # this process ran 2× its prediction
    assert p.eta(1) == 50.0  # already scaled by the caller: only shared by the workers
    p.stage_start("lr", 0, 4, [(50.0, 0.0)] * 2)
    p.trial_done(10.0, 20.0)
    assert p.eta(1) == 100.0  # a stage's remaining time takes this process's ratio


def test_a_stage_prices_its_trials_by_their_place_in_the_layout():
    import optuna

    from transfer.search.stages import stage_left

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study()
    study.add_trial(optuna.trial.create_trial(params={}, distributions={}, value=1.0))  # copied
    for b in (16, 32, 64):
        study.enqueue_trial({"batch_size": b})
    running = study.ask()  # the first queued choice (layout place 1), on another worker
    left = stage_left(study, [(0.0, 0.0, 0.0), (5.0, 0.0, 5.0), (7.0, 0.5, 3.5), (9.0, 0.5, 4.5),
                              (11.0, 0.5, 5.5)])
    assert running.number == 1 and [t[0] for t in left] == [5.0, 7.0, 9.0, 11.0]
    assert left[0][1] >= 0.0 and all(t[1] == 0.0 for t in left[1:])
    assert [t[2:] for t in left] == [(0.0, 5.0), (0.5, 3.5), (0.5, 4.5), (0.5, 5.5)]


def test_the_printed_eta_rounds_to_the_nearest_second():
    from transfer.search.progress import _fmt_s

    assert _fmt_s(6.9) == "0m07s" and _fmt_s(6.4) == "0m06s" and _fmt_s(-3.0) == "0m00s"
    assert _fmt_s(3725.0) == "1h02m"


def test_work_queued_after_the_trials_adds_to_their_makespan():
    out = io.StringIO()
    p = Progress("lines", out, workers=2)
    # 2 queued trials of 50 s on 2 workers, then growth rounds expected to take 30 s
    p.stage_start("validation", 0, 2, [(50.0, 0.0)] * 2, calibrated=True, then=30.0)
    assert p.eta(0) == 80.0
    p.update(1, None, remaining_seconds=[(50.0, 20.0)], then=0.0, total=4)  # another worker grew it
    assert p.eta(1) == 30.0  # measured: nothing comes after any more
    assert out.getvalue().splitlines()[-1] == "stage validation: 1/4 trials, best —, eta 0m30s"


def test_a_grids_ratio_is_to_this_processs_prices_not_each_workers_probe():
    """Two workers probed width 256 apart (105 s and 64 s): the trials' own predictions mixed in
    one ratio would scale this process's 64-s price by 57/84.5; against its own price it is
    57/64, whoever trained them."""
    from transfer.search.probe import queued_trials

    trials = [_Trial("COMPLETE", 256, 57.0, 105.0), _Trial("COMPLETE", 256, 57.0, 64.0),
              _Trial("WAITING", 256)]
    left = queued_trials(_Study(trials), lambda p: 64.0, key=lambda p: p["width"])
    assert left == [(57.0, 0.0)]


def test_the_eta_range_holds_both_ends_of_a_coin_and_nothing_of_a_certainty():
    from transfer.search.progress import Span, makespan, makespan_span

    # one 8-s trial the pruner halves with probability ½: 6 s expected, 4 or 8 taken
    assert makespan_span([(8.0, 0.5, 4.0)], 2) == Span(6.0, 4.0, 8.0)
    assert makespan_span([(8.0, 0.0, 8.0), (4.0, 1.0, 2.0)], 1) == Span.certain(10.0)
    # six coins: all six cut has odds 1/64 < 5 %, so the range stops short of it
    six = makespan_span([(8.0, 0.5, 4.0)] * 6, 2)
    assert makespan([4.0] * 6, 2) < six.low < six.expected < six.high == makespan([8.0] * 6, 2)


def test_a_coin_prints_its_range_and_a_certain_eta_prints_a_point():
    out = io.StringIO()
    p = Progress("lines", out, workers=2)
    p.stage_start("warmup", 1, 4, [(8.0, 0.0, 0.5, 4.0)], calibrated=True)
    p.update(1, 2.0)
    assert out.getvalue().splitlines()[-1].endswith("eta 0m06s (0m04s–0m08s)")
    p.update(1, 2.0, remaining_seconds=[(8.0, 0.0)])
    assert out.getvalue().splitlines()[-1].endswith("eta 0m08s")
    # 60 s certain and a coin of 4 s: inside ±25 % either way, so no range
    p.update(1, 2.0, remaining_seconds=[(60.0, 0.0), (64.0, 0.0, 0.5, 60.0)])
    assert out.getvalue().splitlines()[-1].endswith("eta 1m02s")


def test_growth_after_the_grid_widens_the_range_by_its_uncertain_rounds():
    from transfer.search.progress import Span

    p = Progress("off", workers=2)
    # 2 queued trials of 50 s, then growth: 40 s certain and 40 s more at odds ½ (60 s expected)
    p.stage_start("validation", 0, 2, [(50.0, 0.0)] * 2, calibrated=True,
                  then=Span(60.0, 40.0, 80.0))
    assert p.eta_span(0) == Span(110.0, 90.0, 130.0) and p.eta(0) == 110.0
