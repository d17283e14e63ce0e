"""The streaming actor runtime (`tideflow.runtime`): plan checks, the actor protocol (quota
back-pressure, ordering, streaming of consecutive runs), in-place writes to variables, data
sources, error propagation and shutdown. Task functions sleep instead of computing where a
test needs overlap, so timings do not depend on the machine's BLAS."""

import gc
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tideflow as flow
from tideflow.framework.errors import TideflowError
from tideflow.runtime import (
    DataSource,
    Executor,
    ExecutorClosed,
    PlanError,
    PlanSpec,
    SourceExhausted,
    TaskError,
    TaskSpec,
    check_plan,
)
from tideflow.runtime.inplace import inplace_order
from tideflow.utils.data import DataLoader, TensorDataset

pytestmark = pytest.mark.timeout(60)

TICK = 0.03  # seconds a "slow" task sleeps


def feed(name="x"):
    return TaskSpec(name, fn=None, inputs=(), n_out=1)


def var(name):
    return TaskSpec(f"var:{name}", fn=None, inputs=(), n_out=1)


def task(name, fn, *inputs, n_out=1, stream="compute", mutates=()):
    inputs = tuple((i, 0) if isinstance(i, str) else i for i in inputs)
    return TaskSpec(name, fn=fn, inputs=inputs, n_out=n_out, stream=stream, mutates=mutates)


def plan(*tasks, feeds=("x",), fetches=(), variables=None, quota=2, in_order=frozenset()):
    fetches = tuple((f, 0) if isinstance(f, str) else f for f in fetches)
    return PlanSpec(tuple(tasks), tuple(feeds), fetches, variables or {}, quota, in_order)


class Holder:
    """What the compiler passes as a variable: anything with `.array`."""

    def __init__(self, array):
        self.array = array


def stream_threads():
    return [t for t in threading.enumerate() if t.name.startswith("tideflow-stream")]


@pytest.fixture
def no_leaked_threads():
    baseline = threading.active_count()
    yield
    gc.collect()
    assert stream_threads() == []
    assert threading.active_count() == baseline


# --- plans -----------------------------------------------------------------------------------


def _double(x):
    return (2 * x,)


BAD_PLANS = {
    "duplicate name": (
        plan(feed(), task("a", _double, "x"), task("a", _double, "x")),
        "two tasks are named 'a'",
    ),
    "not topological": (
        plan(feed(), task("a", _double, "b"), task("b", _double, "x")),
        r"task 'a' reads 'b', which is not an earlier task",
    ),
    "output out of range": (
        plan(feed(), task("a", _double, ("x", 1))),
        r"task 'a' reads output 1 of 'x', which has 1 output\(s\)",
    ),
    "feed with inputs": (
        plan(feed(), task("y", _double, "x"), feeds=("x", "y")),
        r"feed task 'y' must have no inputs and n_out=1, got 1 input\(s\)",
    ),
    "unknown feed": (plan(feed(), feeds=("x", "z")), "feed 'z' is not a task of the plan"),
    "unknown variable": (plan(var("w"), feeds=()), "task 'var:w' reads variable 'w', which"),
    "mutates out of range": (
        plan(feed(), task("a", _double, "x", mutates=(1,))),
        r"task 'a' mutates input 1, but it has 1 input\(s\)",
    ),
    "after a later task": (
        plan(feed(), TaskSpec("a", _double, (("x", 0),), 1, after=("b",)), task("b", _double, "x")),
        "task 'a' comes after 'b', which is not an earlier task",
    ),
    "fn not callable": (plan(feed(), task("a", None, "x")), "task 'a': fn must be callable"),
    "unknown fetch": (plan(feed(), fetches=("y",)), "fetch 0 reads 'y', which is not"),
    "quota": (plan(feed(), quota=0), "plan quota must be an integer >= 1, got 0"),
}


@pytest.mark.parametrize("case", list(BAD_PLANS))
def test_check_plan_names_the_problem(case):
    bad, message = BAD_PLANS[case]
    with pytest.raises(PlanError, match=message):
        check_plan(bad)
    with pytest.raises(PlanError, match=message):
        Executor(bad)


def test_plan_error_is_a_tideflow_value_error():
    assert issubclass(PlanError, TideflowError)
    assert issubclass(PlanError, ValueError)


def test_inplace_order_writers_follow_earlier_readers_and_later_readers_follow_writers():
    def update(w, g):
        w -= g
        return ()

    p = plan(
        var("w"),
        feed(),
        task("forward", _double, "var:w"),
        task("update", update, "var:w", "forward", n_out=0, mutates=(0,)),
        task("after", _double, "var:w"),
        feeds=("x",),
        fetches=("var:w", "forward"),
        variables={"w": Holder(np.zeros(1))},
    )
    order = inplace_order(p)
    assert order.written == {("var:w", 0)}
    assert order.waits == {
        "var:w": {"update": {"forward"}, "after": {"update"}, 0: {"update"}},
    }


# --- running ---------------------------------------------------------------------------------


def _split(x):
    return x[:2].copy(), x[2:].copy()


def _reference(x):
    """What the plan of `test_run_computes_a_dag` computes, in NumPy."""
    head, tail = x[:2], x[2:]
    return (head * 3 + tail.sum(), head * 3)


def _dag_plan(quota=2):
    return plan(
        feed(),
        task("split", _split, "x", n_out=2),
        task("triple", lambda a: (a * 3,), ("split", 0), stream="copy"),
        task("total", lambda b: (b.sum(),), ("split", 1)),
        task("add", lambda a, t: (a + t,), "triple", "total"),
        fetches=("add", "triple"),
        quota=quota,
    )


@pytest.mark.parametrize("quota", [1, 2, 3])
def test_run_computes_a_dag(quota, no_leaked_threads):
    inputs = [np.arange(5.0) * i for i in range(6)]
    with Executor(_dag_plan(quota)) as executor:
        runs = [executor.run((x,)) for x in inputs]
        for x, run in zip(inputs, runs, strict=True):
            for got, want in zip(run.result(), _reference(x), strict=True):
                np.testing.assert_array_equal(got, want)


def test_fetching_a_feed_and_the_same_output_twice():
    x = np.arange(3)
    with Executor(plan(feed(), task("d", _double, "x"), fetches=("x", "d", "d"))) as executor:
        got_x, d1, d2 = executor.run((x,)).result()
    assert got_x is x
    np.testing.assert_array_equal(d1, 2 * x)
    assert d1 is d2


def test_run_checks_its_arguments():
    with Executor(_dag_plan()) as executor:
        assert executor.feeds == ("x",)
        with pytest.raises(
            ValueError, match=r"run\(\) takes 1 array\(s\), for feeds \['x'\], got 2"
        ):
            executor.run((np.ones(5), np.ones(5)))
        with pytest.raises(TypeError, match=r"run\(\) takes a tuple of arrays, got ndarray"):
            executor.run(np.ones(5))
        with pytest.raises(ValueError, match="max_in_flight must be an integer >= 1, got 0"):
            Executor(_dag_plan(), max_in_flight=0)


def test_a_task_can_take_one_output_twice():
    p = plan(feed(), task("mul", lambda a, b: (a * b,), "x", "x"), fetches=("mul",))
    with Executor(p) as executor:
        np.testing.assert_array_equal(executor.run((np.arange(3),)).result()[0], [0, 1, 4])


# --- the actor protocol ----------------------------------------------------------------------


@pytest.mark.parametrize("quota", [1, 2, 3])
def test_quota_bounds_the_outputs_in_flight(quota):
    """A fast producer feeding a slow consumer runs at most `quota` outputs ahead: when it
    acts, at most quota - 1 of its earlier outputs are not yet consumed (one slot must be
    free). The consumer holds its first input until the producer has filled every slot, and
    a little longer, so a producer ignoring its quota would be caught running further."""
    produced, consumed, leads = [0], [0], []

    def produce(x):
        leads.append(produced[0] - consumed[0])
        produced[0] += 1
        return (x + 1,)

    def consume(y):
        if consumed[0] == 0:
            deadline = time.monotonic() + 5
            while produced[0] < quota and time.monotonic() < deadline:
                time.sleep(TICK / 10)
        time.sleep(TICK / 3)
        consumed[0] += 1  # before the runtime sends "free": the lead seen is an upper bound
        return (y,)

    p = plan(
        feed(),
        task("produce", produce, "x", stream="copy"),
        task("consume", consume, "produce"),
        fetches=("consume",),
        quota=quota,
    )
    with Executor(p, max_in_flight=16) as executor:
        runs = [executor.run((np.array(i),)) for i in range(12)]
        assert [int(run.result()[0]) for run in runs] == list(range(1, 13))
    assert max(leads) == quota - 1


def test_runs_complete_in_order_and_keep_their_data():
    """Tasks on two streams that sleep for random times: every run's Future holds its own
    inputs' results, and the Futures complete in run order."""
    rng = np.random.default_rng(0)
    delays = iter(rng.uniform(0, TICK / 6, size=200).tolist())

    def slow(fn):
        def run(*arrays):
            time.sleep(next(delays))
            return fn(*arrays)

        return run

    p = plan(
        feed(),
        task("a", slow(lambda x: (x + 1,)), "x", stream="copy"),
        task("b", slow(lambda x: (x * 10,)), "x"),
        task("c", slow(lambda a, b: (a + b,)), "a", "b", stream="copy"),
        fetches=("c", "a"),
    )
    completed = []
    with Executor(p) as executor:
        runs = [executor.run((np.array(i),)) for i in range(30)]
        for i, run in enumerate(runs):
            run.add_done_callback(lambda _, i=i: completed.append(i))
        results = [tuple(int(v) for v in run.result()) for run in runs]
    assert results == [(11 * i + 1, i + 1) for i in range(30)]
    assert completed == list(range(30))


def test_consecutive_runs_stream():
    """Load (copy stream) -> compute (compute stream), each sleeping TICK: run i+1's feed is
    loaded while run i computes, so 4 runs take about 5 ticks instead of 8."""
    spans: dict[tuple[str, int], tuple[float, float]] = {}

    def timed(name):
        count = [0]

        def run(x):
            start = time.perf_counter()
            time.sleep(TICK)
            spans[name, count[0]] = (start, time.perf_counter())
            count[0] += 1
            return (x,)

        return run

    p = plan(
        feed(),
        task("load", timed("load"), "x", stream="copy"),
        task("compute", timed("compute"), "load"),
        fetches=("compute",),
    )
    with Executor(p) as executor:
        start = time.perf_counter()
        runs = [executor.run((np.array(i),)) for i in range(4)]
        for run in runs:
            run.result()
        elapsed = time.perf_counter() - start
    for i in range(3):
        assert spans["load", i + 1][0] < spans["compute", i][1]  # overlap
    assert elapsed < 7 * TICK  # 8 ticks when run one after the other


_OPS = [
    lambda xs: (sum(xs) + 1.0,),
    lambda xs: (np.prod(xs, axis=0) * 0.5 - 1.0,),
    lambda xs: (xs[0] - xs[-1], xs[0] + 2.0),
]


@st.composite
def random_dags(draw):
    """A random DAG of tasks (multi-output ones too) on up to three streams, feeds first."""
    n_feeds = draw(st.integers(1, 2))
    specs = [feed(f"x{i}") for i in range(n_feeds)]
    outputs = [(f"x{i}", 0) for i in range(n_feeds)]
    for t in range(draw(st.integers(1, 12))):
        op = draw(st.integers(0, len(_OPS) - 1))
        inputs = draw(st.lists(st.sampled_from(outputs), min_size=1, max_size=3))
        n_out = 2 if op == 2 else 1
        stream = draw(st.sampled_from(["compute", "copy", "comm"]))
        specs.append(task(f"t{t}", lambda *xs, op=op: _OPS[op](xs), *inputs, n_out=n_out,
                          stream=stream))  # fmt: skip
        outputs += [(f"t{t}", k) for k in range(n_out)]
    fetches = draw(st.lists(st.sampled_from(outputs), min_size=1, max_size=4))
    quota = draw(st.integers(1, 3))
    feeds = tuple(f"x{i}" for i in range(n_feeds))
    in_order = draw(st.frozensets(st.sampled_from(["compute", "copy", "comm"])))
    return plan(*specs, feeds=feeds, fetches=fetches, quota=quota, in_order=in_order)


def _evaluate(p: PlanSpec, feeds) -> tuple:
    values = dict(zip(p.feeds, feeds, strict=True))
    outputs = {}
    for spec in p.tasks:
        if spec.name in values:
            outputs[spec.name] = (values[spec.name],)
        else:
            outputs[spec.name] = spec.fn(*(outputs[n][k] for n, k in spec.inputs))
    return tuple(outputs[n][k] for n, k in p.fetches)


@settings(max_examples=25, deadline=None)
@given(random_dags())
def test_random_dags_match_sequential_evaluation(p):
    rng = np.random.default_rng(1)
    runs_feeds = [tuple(rng.standard_normal(3) for _ in p.feeds) for _ in range(5)]
    with Executor(p) as executor:
        runs = [executor.run(feeds) for feeds in runs_feeds]
        for feeds, run in zip(runs_feeds, runs, strict=True):
            for got, want in zip(run.result(), _evaluate(p, feeds), strict=True):
                np.testing.assert_array_equal(got, want)


def _recorded(calls: list, name: str, delay: float = 0.0):
    def fn(*xs):
        time.sleep(delay)
        calls.append(name)
        return (xs[0] if xs else np.zeros(()),)

    return fn


@pytest.mark.parametrize("in_order", [False, True])
def test_an_in_order_stream_runs_its_tasks_in_plan_order_run_after_run(in_order):
    """`late` waits for a slow task of another stream, `early` only for the feed: by
    readiness `early` acts first (and a later run's `early` before this run's `late`); on an
    in-order stream the tasks take turns in plan order, run after run."""
    calls: list[str] = []
    p = plan(
        feed(),
        task("slow", _recorded([], "slow", TICK), "x"),
        task("late", _recorded(calls, "late"), "slow", stream="comm"),
        task("early", _recorded(calls, "early"), "x", stream="comm"),
        fetches=("late", "early"),
        in_order=frozenset({"comm"}) if in_order else frozenset(),
    )
    with Executor(p) as executor:
        for run in [executor.run((np.array(i),)) for i in range(3)]:
            run.result()
    if in_order:
        assert calls == ["late", "early"] * 3
    else:
        assert calls[:2] == ["early", "early"]


def test_a_task_that_reads_nothing_acts_once_per_run_started():
    """A receive reads no value: it acts when a run starts, not ahead of the runs asked for
    (where it would block its stream waiting for a message nobody sends)."""
    calls: list[str] = []
    p = plan(
        feed(),
        task("receive", _recorded(calls, "receive"), stream="comm"),
        task("use", lambda x, r: (x + r,), "x", "receive"),
        fetches=("use",),
        in_order=frozenset({"comm"}),
    )
    with Executor(p) as executor:
        time.sleep(TICK)
        assert calls == []
        results = [executor.run((np.array(i),)) for i in range(3)]
        assert [int(r.result()[0]) for r in results] == [0, 1, 2]
    assert calls == ["receive"] * 3


def test_a_task_after_another_acts_after_it_in_each_run():
    calls: list[str] = []
    p = plan(
        feed(),
        task("first", _recorded(calls, "first", TICK), "x"),
        TaskSpec("then", _recorded(calls, "then"), (("x", 0),), 1, stream="comm", after=("first",)),
        fetches=("first", "then"),
    )
    with Executor(p) as executor:
        for run in [executor.run((np.array(i),)) for i in range(3)]:
            run.result()
    assert calls == ["first", "then"] * 3


def test_max_in_flight_makes_run_wait():
    release = threading.Event()

    def blocked(x):
        release.wait()
        return (x,)

    p = plan(feed(), task("blocked", blocked, "x"), fetches=("blocked",))
    with Executor(p, max_in_flight=1) as executor:
        first = executor.run((np.array(0),))
        second = []
        caller = threading.Thread(target=lambda: second.append(executor.run((np.array(1),))))
        caller.start()
        caller.join(TICK)
        assert caller.is_alive() and not second  # waits for room
        release.set()
        caller.join()
        assert int(first.result()[0]) == 0 and int(second[0].result()[0]) == 1


def test_close_with_cancel_stops_a_run_waiting_for_room():
    release = threading.Event()

    def blocked(x):
        release.wait()
        return (x,)

    p = plan(feed(), task("blocked", blocked, "x"), fetches=("blocked",))
    executor = Executor(p, max_in_flight=1)
    executor.run((np.array(0),))
    errors = []

    def second_run():
        try:
            executor.run((np.array(1),))
        except ExecutorClosed as exc:
            errors.append(exc)

    caller = threading.Thread(target=second_run)
    caller.start()
    caller.join(TICK)
    closing = threading.Thread(target=executor.close, kwargs={"cancel": True})
    closing.start()
    caller.join()
    assert len(errors) == 1
    release.set()
    closing.join()


# --- variables and in-place writes -----------------------------------------------------------


def _add_one(w):
    w += 1
    return ()


def _slow_copy(w):
    time.sleep(TICK / 6)
    return (w.copy(),)


def test_in_place_writes_are_seen_by_the_next_run_while_runs_stream(no_leaked_threads):
    """`before` (listed before the update, slow, on another stream) must see w before the
    write; `after` (listed after it, but not depending on it) must see it after; the next
    run sees every write of the previous one, though all runs are queued at once."""
    holder = Holder(np.zeros(2))
    p = plan(
        var("w"),
        task("before", _slow_copy, "var:w", stream="copy"),
        task("update", _add_one, "var:w", n_out=0, mutates=(0,)),
        task("after", _slow_copy, "var:w", stream="comm"),
        feeds=(),
        fetches=("before", "after", "var:w"),
        variables={"w": holder},
    )
    with Executor(p) as executor:
        runs = [executor.run(()) for _ in range(6)]
        results = [[float(a[0]) for a in run.result()] for run in runs]
    assert results == [[i, i + 1, i + 1] for i in range(6)]
    np.testing.assert_array_equal(holder.array, [6.0, 6.0])


def test_a_rebound_variable_is_read_by_the_next_run():
    holder = Holder(np.zeros(1))
    p = plan(var("w"), task("copy", _slow_copy, "var:w"), feeds=(), fetches=("copy",),
             variables={"w": holder})  # fmt: skip
    with Executor(p) as executor:
        assert float(executor.run(()).result()[0][0]) == 0
        holder.array = np.full(1, 7.0)  # as eager code or load_state_dict would
        assert float(executor.run(()).result()[0][0]) == 7


def test_an_optimizer_step_on_two_streams_matches_numpy():
    """SGD on a linear model: forward/backward on "compute", the update (writing w in place)
    on "copy". Streamed runs give the same weights as a NumPy loop."""
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((3, 1))
    xs = [rng.standard_normal((4, 3)) for _ in range(8)]
    ys = [rng.standard_normal((4, 1)) for _ in range(8)]

    def forward(x, y, w):
        err = x @ w - y
        return (float(np.mean(err**2)) * np.ones(()), 2 * x.T @ err / len(x))

    def sgd(w, g):
        w -= 0.1 * g
        return ()

    holder = Holder(w0.copy())
    p = plan(
        feed("x"),
        feed("y"),
        var("w"),
        task("forward", forward, "x", "y", "var:w", n_out=2),
        task("sgd", sgd, "var:w", ("forward", 1), n_out=0, stream="copy", mutates=(0,)),
        feeds=("x", "y"),
        fetches=("forward",),
        variables={"w": holder},
    )
    with Executor(p) as executor:
        runs = [executor.run((x, y)) for x, y in zip(xs, ys, strict=True)]
        losses = [float(run.result()[0]) for run in runs]
    w, expected = w0.copy(), []
    for x, y in zip(xs, ys, strict=True):
        loss, g = forward(x, y, w)
        expected.append(float(loss))
        w -= 0.1 * g
    np.testing.assert_allclose(losses, expected)
    np.testing.assert_allclose(holder.array, w)


# --- data sources ----------------------------------------------------------------------------


def _source_plan():
    return plan(
        feed("x"),
        feed("y"),
        task("add", lambda x, y: (x + y,), "x", "y"),
        feeds=("x", "y"),
        fetches=("add",),
    )


def test_a_data_source_fills_feeds():
    batches = [(np.array(i), np.array(10 * i)) for i in range(4)]
    with Executor(_source_plan(), sources=[DataSource(batches, feeds=("x", "y"))]) as executor:
        assert executor.feeds == ()
        assert [int(executor.run().result()[0]) for _ in range(4)] == [0, 11, 22, 33]


def test_a_data_loader_as_data_source():
    xs, ys = flow.arange(12.0).reshape(6, 2), flow.arange(6.0)
    loader = DataLoader(TensorDataset(xs, ys), batch_size=2)
    batches = ((x.numpy(), y.numpy()) for x, y in loader)
    p = plan(feed("x"), feed("y"), task("dot", lambda x, y: (x.T @ y,), "x", "y"),
             feeds=("x", "y"), fetches=("dot",))  # fmt: skip
    with Executor(p, sources=[DataSource(batches, feeds=("x", "y"))]) as executor:
        got = [executor.run().result()[0] for _ in range(3)]
    want = [xs.numpy()[i : i + 2].T @ ys.numpy()[i : i + 2] for i in (0, 2, 4)]
    np.testing.assert_array_equal(np.stack(got), np.stack(want))


def test_a_data_source_next_to_run_feeds():
    source = DataSource((((np.array(i),) for i in range(3))), feeds=("y",))
    with Executor(_source_plan(), sources=[source]) as executor:
        assert executor.feeds == ("x",)
        runs = [executor.run((np.array(100 * i),)) for i in range(3)]
        assert [int(run.result()[0]) for run in runs] == [0, 101, 202]


def test_loading_overlaps_compute():
    """Each batch takes TICK to load and TICK to compute: batch i+1 is loaded while run i
    computes, without the caller doing anything but calling run and result."""
    pulls, computes = [], []

    def batches():
        for i in range(4):
            start = time.perf_counter()
            time.sleep(TICK)
            pulls.append((start, time.perf_counter()))
            yield (np.array(i),)

    def compute(x):
        start = time.perf_counter()
        time.sleep(TICK)
        computes.append((start, time.perf_counter()))
        return (x,)

    p = plan(feed(), task("compute", compute, "x"), fetches=("compute",))
    with Executor(p, sources=[DataSource(batches(), feeds=("x",))]) as executor:
        assert [int(executor.run().result()[0]) for _ in range(4)] == [0, 1, 2, 3]
    for i in range(3):
        assert pulls[i + 1][0] < computes[i][1]


def test_a_run_past_the_last_batch_raises_source_exhausted(no_leaked_threads):
    batches = [(np.array(i), np.array(i)) for i in range(3)]
    with Executor(_source_plan(), sources=[DataSource(batches, feeds=("x", "y"))]) as executor:
        assert [int(executor.run().result()[0]) for _ in range(3)] == [0, 2, 4]
        with pytest.raises(SourceExhausted, match=r"ended after 3 batch\(es\): run 3 has no"):
            executor.run()
        with pytest.raises(SourceExhausted):
            executor.run()


def test_runs_queued_past_the_last_batch_fail_and_earlier_ones_complete():
    with Executor(_source_plan(), sources=[DataSource([(1, 2)] * 2, feeds=("x", "y"))]) as ex:
        runs = []
        for _ in range(4):
            try:
                runs.append(ex.run())
            except SourceExhausted:  # the source may have looked ahead already
                break
        assert [run.result()[0] for run in runs[:2]] == [3, 3]
        for run in runs[2:]:
            with pytest.raises(SourceExhausted):
                run.result()


def test_a_failing_data_source_fails_the_runs_from_its_batch_on():
    def batches():
        yield (np.array(1), np.array(2))
        raise OSError("disk gone")

    with Executor(_source_plan(), sources=[DataSource(batches(), feeds=("x", "y"))]) as ex:
        assert int(ex.run().result()[0]) == 3
        with pytest.raises(TaskError, match=r"'source\(x, y\)' failed in iteration 1: OSError"):
            ex.run()


def test_a_data_source_checks_its_batches():
    source = DataSource([np.ones(2)], feeds=("x", "y"))
    with (
        Executor(_source_plan(), sources=[source]) as executor,
        pytest.raises(
            TaskError,
            match=r"each batch must be a tuple of 2 array\(s\) for feeds \['x', 'y'\], "
            "got ndarray",
        ),
    ):
        executor.run().result()  # run() raises if the source has already pulled the batch


@pytest.mark.parametrize(
    ("feeds", "message"),
    [
        (
            ("x", "z"),
            r"DataSource feeds 'z', which is not a feed of the plan \(feeds: \['x', 'y'\]",
        ),
        ((), "a DataSource must name at least one feed"),
    ],
)
def test_data_sources_must_name_feeds(feeds, message):
    with pytest.raises(PlanError, match=message):
        Executor(_source_plan(), sources=[DataSource([], feeds=feeds)])


def test_two_data_sources_cannot_fill_one_feed():
    sources = [DataSource([], feeds=("x",)), DataSource([], feeds=("x",))]
    with pytest.raises(PlanError, match="feed 'x' is filled by two data sources"):
        Executor(_source_plan(), sources=sources)


# --- errors and shutdown ---------------------------------------------------------------------


def _fails_on(call: int):
    count = [0]

    def fn(x):
        count[0] += 1
        if count[0] == call + 1:
            raise ValueError(f"bad value {int(x)}")
        return (x,)

    return fn


def test_a_failing_task_stops_the_plan_and_names_itself(no_leaked_threads):
    p = plan(feed(), task("ok", _double, "x"), task("matmul_12", _fails_on(2), "ok"),
             fetches=("matmul_12",))  # fmt: skip
    executor = Executor(p)
    assert int(executor.run((np.array(1),)).result()[0]) == 2
    assert int(executor.run((np.array(2),)).result()[0]) == 4
    failed = executor.run((np.array(3),))
    message = r"task 'matmul_12' failed in iteration 2: ValueError: bad value 6"
    with pytest.raises(TaskError, match=message) as info:
        failed.result()
    assert info.value.task == "matmul_12" and info.value.iteration == 2
    assert isinstance(info.value.__cause__, ValueError)
    with pytest.raises(TaskError, match=message):  # the next run raises it too
        executor.run((np.array(4),))
    executor.close()
    executor.close()  # idempotent


def test_after_an_error_a_new_executor_runs_the_plan(no_leaked_threads):
    broken = [True]

    def fn(x):
        if broken[0]:
            raise RuntimeError("not yet")
        return (x + 1,)

    p = plan(feed(), task("inc", fn, "x", stream="copy"), fetches=("inc",))
    with Executor(p) as executor, pytest.raises(TaskError, match="task 'inc' failed"):
        executor.run((np.array(0),)).result()
    broken[0] = False
    with Executor(p) as executor:
        assert int(executor.run((np.array(0),)).result()[0]) == 1


def test_an_error_fails_its_run_and_the_later_ones_while_earlier_ones_complete():
    p = plan(feed(), task("slow", _slow_copy, "x", stream="copy"),
             task("bad", _fails_on(2), "slow"), fetches=("bad", "slow"))  # fmt: skip
    with Executor(p) as executor:
        runs = [executor.run((np.array(i),)) for i in range(6)]
        assert [int(run.result()[0]) for run in runs[:2]] == [0, 1]
        for run in runs[2:]:
            with pytest.raises(TaskError, match="task 'bad' failed in iteration 2"):
                run.result()


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (lambda x: x, r"fn must return a tuple of 1 array\(s\), got ndarray"),
        (lambda x: (x, x), r"fn must return a tuple of 1 array\(s\), got a tuple of 2"),
        (lambda x: [x], r"fn must return a tuple of 1 array\(s\), got a list of 1"),
    ],
)
def test_a_task_must_return_a_tuple_of_n_out(fn, message):
    with (
        Executor(plan(feed(), task("t", fn, "x"), fetches=("t",))) as executor,
        pytest.raises(TaskError, match=message),
    ):
        executor.run((np.ones(2),)).result()


def test_a_variable_holder_needs_an_array():
    p = plan(var("w"), task("d", _double, "var:w"), feeds=(), fetches=("d",),
             variables={"w": object()})  # fmt: skip
    with Executor(p) as executor, pytest.raises(TaskError, match="task 'var:w' failed in iter"):
        executor.run().result()


def test_close_lets_started_runs_finish_and_joins_every_thread(no_leaked_threads):
    p = plan(feed(), task("slow", _slow_copy, "x", stream="copy"), task("d", _double, "slow"),
             fetches=("d",))  # fmt: skip
    executor = Executor(p)
    assert len(stream_threads()) == 2
    runs = [executor.run((np.array(i),)) for i in range(3)]
    executor.close()
    assert stream_threads() == []
    assert [int(run.result()[0]) for run in runs] == [0, 2, 4]
    with pytest.raises(ExecutorClosed, match=r"run\(\) on a closed Executor"):
        executor.run((np.array(0),))
    executor.close()
    assert "closed" in repr(executor)


def test_close_with_cancel_fails_unfinished_runs(no_leaked_threads):
    release = threading.Event()

    def blocked(x):
        release.wait()
        return (x,)

    executor = Executor(plan(feed(), task("blocked", blocked, "x"), fetches=("blocked",)))
    runs = [executor.run((np.array(i),)) for i in range(3)]
    closing = threading.Thread(target=executor.close, kwargs={"cancel": True})
    closing.start()
    for run in runs:
        with pytest.raises(ExecutorClosed, match="the Executor was closed"):
            run.result(timeout=5)
    release.set()  # the task running when close was called returns; then the threads end
    closing.join()


def test_leaving_a_with_block_by_an_exception_cancels(no_leaked_threads):
    with pytest.raises(KeyError), Executor(_dag_plan()) as executor:
        run = executor.run((np.arange(5.0),))
        raise KeyError("user code failed")
    assert run.done()


def test_a_dropped_executor_stops_its_threads(no_leaked_threads):
    executor = Executor(_dag_plan())
    executor.run((np.arange(5.0),)).result()
    del executor
