"""What a rank may have skipped, read from the code's structure (nbhelpers.diagnosis.structure)."""
from pathlib import Path

from nbhelpers.diagnosis.structure import EarlyExit, early_exit_before

REAL = Path(__file__).parent / "userscripts_heldout17" / "multitask_load_forecast.py"  # written apart from the rules


def test_a_conditional_return_before_the_call_in_a_real_script():
    src = REAL.read_text()
    line = next(i for i, t in enumerate(src.splitlines(), 1) if "records = self.reporter.collect(" in t)
    ex = early_exit_before(src, line)
    assert ex == EarlyExit("finish", line - 2, line - 4, "if not self.exports_artifacts"), ex
    assert early_exit_before(src, line - 3) is None  # the return's own branch: a rank there has not skipped it


SRC = '''\
def train(loader, cfg):
    for batch in loader:
        if batch is None:
            return None
        step(batch)
    if cfg.only_eval:
        def helper():
            return 1
        return helper()
    gather()
    if cfg.extra:
        dist.barrier()
        return
    finish()
'''


def test_which_returns_count():
    # the last conditional return on the way to the line, in its own function, outside the line's own branch
    assert early_exit_before(SRC, 10) == EarlyExit("train", 9, 6, "if cfg.only_eval")
    assert early_exit_before(SRC, 5) == EarlyExit("train", 4, 3, "if batch is None")
    assert early_exit_before(SRC, 12) == EarlyExit("train", 9, 6, "if cfg.only_eval")  # not the return after it
    assert early_exit_before(SRC, 14) == EarlyExit("train", 13, 11, "if cfg.extra")
    assert early_exit_before(SRC, 8) is None          # a nested function's own line: no return before it there
    assert early_exit_before(SRC, 2) is None          # nothing before it
    assert early_exit_before("def f(:\n", 1) is None  # source that does not parse
    assert early_exit_before("x = 1\n", 1) is None    # module level: no function


MAPPED = '''\
import numpy as np

def build(path, arr):
    m = np.memmap(path, dtype=np.uint16, mode="w+", shape=arr.shape)
    m[:] = arr

def read(path):
    return np.memmap(path, dtype=np.uint16, mode="r")

def main(rank, arr):
    if rank % 2 == 1:
        build("a.bin", arr)
    np.lib.format.open_memmap("b.npy", "w+", shape=(3,))
'''


def test_rewrites_of_mapped_files_and_the_condition_they_run_under():
    from nbhelpers.diagnosis.structure import mapped_rewrites

    found = mapped_rewrites(MAPPED)
    assert [(m.line, m.func, m.guard_line, m.guard) for m in found] == [
        (4, "build", 11, "if rank % 2 == 1"),   # the condition around the call of its function
        (13, "main", None, None)], found        # every rank rewrites it: no condition
    assert "numpy.org" in found[0].source and "overwrites" in found[0].says
    assert mapped_rewrites("def f(:\n") == []


def test_a_truncating_save_of_a_path_the_script_maps_is_a_rewrite():
    # fourth framework set: np.save (open(path, "wb") truncates) of the very path np.load(..., mmap_mode="r") maps,
    # run by one rank under a documented condition; np.save of a file nobody maps is no rewrite
    from nbhelpers.diagnosis.structure import mapped_rewrites

    src = """import numpy as np
class Cache:
    def open(self):
        self.x = np.load(self.path_x, mmap_mode="r")
        self.y = np.load(self.path_y)
    def rewrite(self, keep):
        np.save(self.path_x, self.x[keep])
        np.save(self.path_y, self.y[keep])
def main(accelerator, cache, keep):
    if accelerator.is_main_process:
        cache.rewrite(keep)
"""
    found = mapped_rewrites(src)
    assert [(m.line, m.call, m.guard) for m in found] == [(7, "np.save(self.path_x, self.x[keep])",
                                                           "if accelerator.is_main_process")], found
    assert "truncates" in found[0].says and "docs.python.org" in found[0].source


FLOW = '''\
import os
import torch.distributed as dist
import torch.multiprocessing as mp
ROLE = {0: "learner", 1: "evaluator"}

def is_main_process():
    return dist.get_rank() == 0

class Trainer:
    def __init__(self, rank, loader):
        self.rank = rank
        self.loader = loader

    @property
    def is_lead(self):
        return self.rank == 0

def worker(idx, cfg):
    tokenizer = idx % cfg.world == cfg.world - 1
    role = ROLE[int(os.environ["RANK"])]
    t = Trainer(rank=dist.get_rank(), loader=make_loader(shard=dist.get_rank()))
    loss = t.loader.mean()
    if tokenizer:
        refill()
    if role == "evaluator":
        evaluate()
    if t.is_lead:
        save()
    if loss < 0.5:
        stop()
    if is_main_process():
        report()

mp.spawn(worker, args=(cfg,), nprocs=2)
'''


def test_values_that_differ_by_rank_are_followed_through_the_files_own_code():
    from nbhelpers.diagnosis.structure import rank_flow

    flow = rank_flow(FLOW)
    def at(text):
        return next(i for i, t in enumerate(FLOW.splitlines(), 1) if text in t)
    assert flow.branch(at("refill()")) == (at("if tokenizer:"), "if tokenizer")   # mp.spawn's first argument
    assert flow.branch(at("evaluate()"))[1] == 'if role == "evaluator"'             # a role from a dict, by RANK
    assert flow.branch(at("save()"))[1] == "if t.is_lead"                           # a property over a parameter
    assert flow.branch(at("report()"))[1] == "if is_main_process()"                 # a function returning it
    assert flow.branch(at("stop()")) is None  # the loss over the rank's own shard: its data, not its role
    assert rank_flow("def f(:\n") is None


def test_a_loop_left_early_has_a_guarded_break_or_return_of_its_own():
    from nbhelpers.diagnosis.structure import loop_exit

    src = ("def train(loader, stopper):\n"
           "    for epoch in range(10):\n"            # 2: left early through the guarded break
           "        for batch in loader:\n"           # 3: its break leaves only itself
           "            if batch is None:\n"
           "                break\n"
           "        if stopper.should_stop():\n"
           "            break\n"
           "    for x in loader:\n"                   # 8: runs until its data ends
           "        step(x)\n"
           "    while True:\n"                        # 10: a return under a condition
           "        if done():\n"
           "            return\n")
    assert loop_exit(src, 2) == 7 and loop_exit(src, 3) == 5
    assert loop_exit(src, 8) is None and loop_exit(src, 10) == 12 and loop_exit(src, 4) is None


def test_which_ranks_a_test_holds_on():
    import ast

    from nbhelpers.diagnosis.structure import RankFlow

    src = '''
import os
import torch.distributed as dist
class Ctx:
    def __init__(self):
        self.rank = int(os.environ["RANK"])
        self.leader = self.rank == 0
    @property
    def primary(self):
        return self.rank == 0
def is_primary():
    return dist.get_rank() == 0
c = Ctx()
'''
    tests = {"c.leader": ("eq", 0), "c.primary": ("eq", 0), "is_primary()": ("eq", 0), "not is_primary()": ("ne", 0),
             "c.rank != 0": ("ne", 0), "not c.rank": ("eq", 0), "0 == c.rank": ("eq", 0), "c.rank > 0": ("ne", 0),
             "c.rank == 1": ("eq", 1), "c.rank % 2 == 1": None, "not c.leader": ("ne", 0), "c.rank < 1": ("eq", 0)}
    flow = RankFlow(src + "".join(f"if {t}: pass\n" for t in tests))
    got = {ast.unparse(n.test): flow.which(n.test) for n in ast.walk(flow.tree) if isinstance(n, ast.If)}
    assert got == tests


PIPE = '''
import torch.distributed as dist

def p2p(op, t, peer):
    for req in dist.batch_isend_irecv([dist.P2POp(op, t, peer)]):
        req.wait()

def main(loader, stage, peer):
    rank = dist.get_rank()
    for x, y in loader:
        if rank == 0:
            p2p(dist.isend, stage(x), peer)
            p2p(dist.irecv, x, peer)
            continue
        act = x.new_empty(4)
        p2p(dist.irecv, act, peer)
        loss = stage(act, y)
        if loss is None:
            continue
        for k in range(3):
            if k:
                break
        loss.backward()
        p2p(dist.isend, act.grad, peer)
'''


def test_a_conditional_continue_before_the_send_a_peer_waits_to_receive():
    from nbhelpers.diagnosis.structure import rank_flow, receives_at, skipped_send

    def at(text):
        return next(i for i, t in enumerate(PIPE.splitlines(), 1) if text in t)
    flow = rank_flow(PIPE)
    stage1 = skipped_send(PIPE, at("p2p(dist.irecv, act, peer)"), flow)
    assert (stage1.guard, stage1.exit_line, stage1.send) == ("if loss is None", at("if loss is None") + 1,
                                                             "p2p(dist.isend, act.grad, peer)")
    # stage 0's branch of the rank test ends in its own continue: it never reaches stage 1's skip
    assert skipped_send(PIPE, at("p2p(dist.irecv, x, peer)"), flow) is None
    assert skipped_send(PIPE, at("p2p(dist.irecv, act, peer)")) is not None   # read alone, `rank == 0` is no role
    assert receives_at(PIPE, at("p2p(dist.irecv, act, peer)")) and not receives_at(PIPE, at("loss.backward()"))
    # the send first, then the skip: nothing skipped
    assert skipped_send(PIPE.replace("        if loss is None:\n            continue\n", "")
                        + "        if loss is None:\n            continue\n", at("p2p(dist.irecv, act, peer)"), flow) is None


def test_the_dtype_a_tensor_gets_from_the_constants_of_the_code():
    from nbhelpers.diagnosis.structure import constant_dtypes

    src = '''
import numpy as np
import torch
import torch.distributed as dist

class Tracker:
    def __init__(self):
        self.recalls = []
        self.sums = {"loss": 0, "n": 0}

    def step(self, tp, pos, loss, n):
        self.recalls.append(tp / pos if pos else 0)
        self.sums["loss"] += loss.item()
        self.sums["n"] += n

    def local(self, v):
        if not v:
            return torch.zeros(2)
        return torch.from_numpy(np.array(v))

    def sync(self, v):
        dist.all_gather(torch.tensor(self.recalls))
        t = self.local(v)
        dist.all_reduce(t)
        s = torch.tensor([self.sums["loss"], self.sums["n"]])
        dist.all_reduce(s)
        dist.all_reduce(torch.zeros(2, dtype=torch.float64))
'''
    lines = src.splitlines()
    def at(text):
        return next(i for i, t in enumerate(lines, 1) if text in t)
    def got(text):
        return [(c.dtype, c.text) for c in constant_dtypes(src, at(text))]
    assert got("all_gather(") == [("int64", "0")]                      # `else 0` beside a true division (computed)
    assert got("all_reduce(t)") == [("float32", "torch.zeros(2)")]     # from_numpy: the data's, not a constant's
    assert got("all_reduce(s)") == [("int64", "0")]                    # the dict's initial ints; .item(): the data's
    assert got("float64") == []                                        # dtype= given: nothing of torch's choosing
    assert constant_dtypes("def f(:\n", 1) == []


def test_an_early_stop_reads_a_value_the_loop_computes():
    from nbhelpers.diagnosis.structure import early_stop

    src = '''
def fit(loader, model, max_steps, target):
    step = 0
    for epoch in range(10):
        for x, y in loader:
            loss = model(x, y)
            step += 1
            if step >= max_steps:
                return
        acc = model.evaluate()
        if acc >= target:
            break
'''
    lines = src.splitlines()
    def at(text):
        return next(i for i, t in enumerate(lines, 1) if text in t)
    s = early_stop(src, at("loss = model"))
    assert (s.loop, s.guard, s.exit_line) == ("for epoch in range(10)", "if acc >= target", at("break"))
    # a budget over a counter and a setting: every rank reaches it at the same step
    assert early_stop(src.replace("        if acc >= target:\n            break\n", ""), at("loss = model")) is None


def test_the_module_level_call_of_the_scripts_entry_function():
    from nbhelpers.diagnosis.structure import own_call_at

    src = "import os\ndef main():\n    pass\nif __name__ == '__main__':\n    os.getpid()\n    main()\n"
    assert own_call_at(src, 6) == "main" and own_call_at(src, 5) is None and own_call_at("def f(:\n", 1) is None
