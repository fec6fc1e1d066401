"""Set-up shared by the job's end-to-end tests (ci_job_test.py, resume_test.py,
evaluation_failure_test.py, checkpoint_stop_test.py): their arguments, a fresh work folder and the tiny model their jobs
train, the environment mpirun needs as root, and how a test fails."""
import argparse
import os
import shutil
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Open MPI refuses root without these, and 4 ranks on a 2-core machine need oversubscription.
MPIRUN_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
              "OMPI_MCA_rmaps_base_oversubscribe": "1"}


def fail(message):
    """Ends the test as failed, saying why."""
    print("FAIL:", message, file=sys.stderr)
    sys.exit(1)


def prepare(quiet=False, add_arguments=None):
    """Parses --crl, --work, --mpirun (and what add_arguments(parser) adds); empties the work folder
    and makes the tiny model in it. Returns (args, model folder), or None when h5py is missing (the
    caller prints nothing more and exits 0: the test is skipped, saying why)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--crl", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--mpirun", default=shutil.which("mpirun") or "mpirun")
    if add_arguments is not None:
        add_arguments(ap)
    args = ap.parse_args()
    try:
        import h5py  # noqa: F401
    except ImportError:
        print("SKIP: h5py is not installed in", sys.executable)
        return None
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    model = os.path.join(args.work, "model")
    corpus = os.path.join(REPO, "tests", "data", "policy", "tokenizers", "train_corpus.txt")
    subprocess.run([args.crl, "init-model", "--out", model, "--corpus", corpus, "--vocab-size", "400", "--hidden", "32",
                    "--layers", "1", "--heads", "2", "--kv-heads", "1", "--seed", "3"], check=True,
                   stdout=subprocess.DEVNULL if quiet else None)
    return args, model


def descendants(root):
    """Every process below pid `root` (from /proc), as {pid: command name}."""
    children = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = open(f"/proc/{pid}/stat").read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append((int(pid), name))
    out, todo = {}, [root]
    while todo:
        for pid, name in children.get(todo.pop(), []):
            out[pid] = name
            todo.append(pid)
    return out


def job_head(name, tasks, eval_settings=None):
    """The lines a CPU job of these tests starts with, through `tasks:` and `eval:` (settings
    as YAML flow text, e.g. "scale: small, trials: 1"); the test appends its stages."""
    head = f"""name: {name}
seed: 1
model: unused                    # replaced by --model
prompt_format: raw
backend: cpu
roles: {{trainers: 1}}
instructions: {REPO}/jobs/data/ci_instructions.md
tasks: {{ids: [{tasks}]}}
"""
    return head + (f"eval: {{{eval_settings}}}\n" if eval_settings is not None else "")
