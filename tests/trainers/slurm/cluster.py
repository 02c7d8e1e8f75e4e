"""A real SLURM cluster on this machine for tests: its own munged, slurmctld, a slurmd per node.

Usage::

    from cluster import LocalSlurm, require_slurm

    require_slurm()  # skip without SLURM (the reason names the apt-get command); CI: fail
    cluster = LocalSlurm.start(tmp_path / "slurm", nodes=2, cpus_per_node=1)
    try:
        job_id = cluster.submit(script)  # sbatch --parsable, run in the script's directory
        result = cluster.wait(job_id, timeout=120)
        assert result.state == "COMPLETED" and result.exit_code == 0, result.diagnosis
        cluster.run(["srun", "-N2", "hostname"])  # any client command, against this cluster
        subprocess.run([...], env=cluster.environ())  # or a command of your own
    finally:
        cluster.stop()  # everything of the cluster ends, job processes included

Everything lives under `root`: slurm.conf, the munge key and socket, state, spool, PID files and
logs (`root/log/slurmctld.log`, `root/log/slurmd-n1.log`, ...). Ports are picked free at start,
so several clusters (one per pytest-xdist worker) run side by side; the client commands find
this one through SLURM_CONF, which `env` holds. tests/trainers/slurm/conftest.py has the fixtures:
`slurm_cluster` (two nodes for a test file) and `start_slurm` (a cluster of a test's own).

Measured behaviour the tests rely on (slurm 22.05, proctrack/linuxproc):
- there is no accounting database, so `sacct` does not work: a job's end is read from
  `scontrol show job`, which keeps finished jobs for MinJobAge (set to an hour);
- the nodes are names, not hosts: every node runs on 127.0.0.1 and shares one network
  namespace and one `hostname`; a task tells its node by SLURM_NODEID / SLURMD_NODENAME.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

INSTALL = "apt-get install -y --no-install-recommends slurmctld slurmd slurm-client munge"
# The daemons, and the client commands this module runs.
COMMANDS = (
    "munged",
    "slurmctld",
    "slurmd",
    "sbatch",
    "srun",
    "scontrol",
    "scancel",
    "sinfo",
    "squeue",
)
# Daemons live in sbin, which is not on a non-root user's PATH on Debian.
SBIN = ("/usr/sbin", "/sbin", "/usr/local/sbin")

START_S = 60.0  # munged, slurmctld and the slurmds up and every node idle (a busy machine)
STOP_S = 20.0  # a daemon's grace after SIGTERM (a slurmd was seen taking > 3 s), then SIGKILL
JOBS_END_S = 10.0  # stop(): the cancelled jobs' processes given to end before being killed
POLL_S = 0.2

# JobState values after which a job changes no more (a job still COMPLETING is not final:
# its processes may still run).
FINAL_STATES = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "TIMEOUT",
    }
)

# Variables of an enclosing SLURM job (a CI runner that is itself a SLURM job) would make
# sbatch and srun act inside that job; the commands of a local cluster must not see them.
_INHERITED = ("SLURM_", "SBATCH_", "SRUN_", "SALLOC_")


class SlurmError(RuntimeError):
    """The cluster failed to start or stop, a command failed, or a job did not end in time; the
    message quotes the daemon logs that say why."""


def available() -> str | None:
    """None when the SLURM and munge binaries are installed, else why not and how to install."""
    missing = [name for name in COMMANDS if _which(name) is None]
    if not missing:
        return None
    return f"SLURM is not installed ({', '.join(missing)} not found): {INSTALL}"


def require_slurm() -> None:
    """In a test: skip it when SLURM is not installed, or fail it when TRAINSPEC_REQUIRE_SLURM=1
    (CI sets it, so that a missing install can never pass as a skip)."""
    import pytest  # only tests call this; the module itself needs no pytest

    reason = available()
    if reason is None:
        return
    if os.environ.get("TRAINSPEC_REQUIRE_SLURM") == "1":
        pytest.fail(f"TRAINSPEC_REQUIRE_SLURM=1, but {reason}", pytrace=False)
    pytest.skip(reason)


@dataclass(frozen=True)
class JobResult:
    """A job as `scontrol show job` last reported it."""

    job_id: int
    state: str  # JobState: COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL, RUNNING, ...
    exit_code: int  # the batch script's exit status (ExitCode=<status>:<signal>)
    signal: int  # the signal that ended the batch script, 0 when none
    nodes: list[str]  # the allocated nodes, expanded: ["n1", "n2"]
    reason: str  # Reason, e.g. NonZeroExitCode
    stdout: Path | None  # the job's output file (StdOut)
    record: dict[str, str]  # every field of `scontrol show job -o`
    diagnosis: str  # the record, the output file's tail and the daemon logs' tails

    @property
    def ok(self) -> bool:
        return self.state == "COMPLETED" and self.exit_code == 0


class LocalSlurm:
    """One cluster under `root`; build it with `LocalSlurm.start(...)`, end it with `stop()`."""

    def __init__(self, root: Path, nodes: int, cpus_per_node: int) -> None:
        self.root = Path(root).resolve()
        self.conf = self.root / "slurm.conf"
        self.nodes = [f"n{i}" for i in range(1, nodes + 1)]
        self.cpus_per_node = cpus_per_node
        self.user = pwd.getpwuid(os.getuid()).pw_name  # the daemons run as, and jobs run as
        self.log_dir = self.root / "log"
        # Merge into a subprocess's environment to reach this cluster (environ() does that).
        self.env = {"SLURM_CONF": str(self.conf)}
        self._daemons: dict[str, subprocess.Popen] = {}  # log name -> process, in start order
        self._stopped = False

    # -- start ---------------------------------------------------------------------------------

    @classmethod
    def start(cls, root: Path, nodes: int = 2, cpus_per_node: int = 1) -> LocalSlurm:
        """Write slurm.conf, start munged, slurmctld and a slurmd per node, and return once
        `sinfo` shows every node idle. Raises SlurmError (quoting the logs) on failure, with
        nothing left running."""
        reason = available()
        if reason:
            raise SlurmError(reason)
        cluster = cls(root, nodes, cpus_per_node)
        # A port picked free can be taken by another process before the daemon binds it (two
        # clusters starting at once): that start is retried on fresh ports.
        for attempt in range(3):
            try:
                cluster._start_once()
                return cluster
            except SlurmError as error:
                cluster._stop_quietly()
                if attempt == 2 or "Address already in use" not in str(error):
                    raise
        raise AssertionError("unreachable")

    def _start_once(self) -> None:
        self._stopped = False
        self._daemons = {}
        # Processes of an earlier cluster on this root (its test process died) would hold the
        # root's files: they go first.
        for pid in self.processes():
            _kill(pid)
        # A fresh cluster every start: no jobs, nodes or logs of an earlier one.
        for name in ("state", "spool", "run", "log", "munge"):
            shutil.rmtree(self.root / name, ignore_errors=True)
        for name in ("state", "run", "log", *(f"spool/{node}" for node in self.nodes)):
            (self.root / name).mkdir(parents=True)
        # munged refuses a socket directory others may write to, and wants the key in a
        # directory of its own that nobody else may read.
        (self.root / "munge").mkdir(mode=0o755)
        key_dir = self.root / "munge" / "key"
        key_dir.mkdir(mode=0o700)
        key = key_dir / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        socket_path = self.root / "munge" / "socket"
        if len(str(socket_path)) > 100:  # sockaddr_un holds 108 bytes
            raise SlurmError(f"{self.root} is too long a path for munge's socket; use a shorter")

        ctld_port, *node_ports = _free_ports(1 + len(self.nodes))
        self.conf.write_text(self._slurm_conf(socket_path, ctld_port, node_ports))

        # Foreground daemons (-F, -D), children of this process: their PIDs are known at once
        # (the PID files say the same), an early exit shows as an exit status instead of a
        # missing PID file, and this process reaps them, so no zombie outlives stop().
        self._spawn(
            "munged",
            [
                _which("munged"),
                "--foreground",
                # Without it munged refuses a socket whose path others cannot traverse, as
                # pytest's private 0700 temp directories: every client runs as this user.
                "--force",
                f"--socket={socket_path}",
                f"--key-file={key}",
                f"--pid-file={self.root / 'run' / 'munged.pid'}",
                f"--seed-file={self.root / 'run' / 'munged.seed'}",
            ],
        )
        self._wait_until(socket_path.exists, "munged created its socket", ["munged"])
        self._spawn("slurmctld", [_which("slurmctld"), "-D", "-f", str(self.conf)])
        # Polled by its port, not by sinfo, which retries a missing controller for seconds.
        self._wait_until(
            lambda: _listening(ctld_port), f"slurmctld listening on {ctld_port}", ["slurmctld"]
        )
        for node in self.nodes:
            self._spawn(
                f"slurmd-{node}", [_which("slurmd"), "-D", "-N", node, "-f", str(self.conf)]
            )
        self._wait_until(self._all_idle, "every node idle in sinfo", list(self._daemons))

    def _slurm_conf(self, socket_path: Path, ctld_port: int, node_ports: Sequence[int]) -> str:
        host = socket.gethostname().split(".")[0]  # `hostname -s`: what slurmd calls its host
        r = self.root
        lines = [
            f"ClusterName=ts{ctld_port}",  # one name per cluster, so the logs tell them apart
            "SlurmctldHost=localhost",
            f"SlurmctldPort={ctld_port}",
            f"SlurmUser={self.user}",
            f"SlurmdUser={self.user}",
            # Every daemon and client command talks to this cluster's own munged.
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={socket_path}",
            "MpiDefault=none",
            "MailProg=/bin/true",  # no mail program installed: silences an error per job
            # Neither needs cgroups or privileges; linuxproc follows a job's processes through
            # their parents (a process orphaned by its parent escapes it: stop() kills those).
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "SchedulerType=sched/backfill",
            # A batch job starts as soon as it is submitted, not up to 3 s later (the default
            # delay batches a high submission rate): a job here took 1 s instead of 3.
            "SchedulerParameters=batch_sched_delay=0",
            # The nodes have the CPUs written here, not the machine's.
            "SlurmdParameters=config_overrides",
            "ReturnToService=2",
            # No accounting database: finished jobs are read from slurmctld, which keeps them
            # this long (seconds).
            "MinJobAge=3600",
            # A cancelled job's processes get SIGTERM, and SIGKILL this many seconds later.
            "KillWait=30",
            f"StateSaveLocation={r}/state",
            f"SlurmdSpoolDir={r}/spool/%n",
            f"SlurmctldPidFile={r}/run/slurmctld.pid",
            f"SlurmdPidFile={r}/run/slurmd-%n.pid",
            f"SlurmctldLogFile={r}/log/slurmctld.log",
            f"SlurmdLogFile={r}/log/slurmd-%n.log",
        ]
        for node, port in zip(self.nodes, node_ports, strict=True):
            lines.append(
                f"NodeName={node} NodeHostname={host} NodeAddr=127.0.0.1 Port={port}"
                f" CPUs={self.cpus_per_node} RealMemory=1000 State=UNKNOWN"
            )
        lines.append("PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
        return "\n".join(lines) + "\n"

    def _spawn(self, name: str, argv: list[str | None]) -> None:
        # munged logs to its console in the foreground; the slurm daemons write their log files
        # and echo them to the console, which also catches errors from before the log is open.
        with open(self.log_dir / f"{name}.out", "wb") as out:
            self._daemons[name] = subprocess.Popen(
                [str(a) for a in argv],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.environ(),  # SLURM_CONF in a process's environment marks it as ours
                start_new_session=True,  # a Ctrl-C at the test's terminal is not theirs
            )

    def _all_idle(self) -> bool:
        listing = self.run(["sinfo", "--noheader", "--Node", "--format=%N %T"], check=False)
        states = dict(line.split() for line in listing.stdout.splitlines() if line.strip())
        return all(states.get(node) == "idle" for node in self.nodes)

    def _wait_until(self, ready, what: str, logs: list[str]) -> None:
        deadline = time.monotonic() + START_S
        while True:
            dead = [name for name, proc in self._daemons.items() if proc.poll() is not None]
            if dead:
                raise SlurmError(
                    f"{', '.join(dead)} exited during start (waiting for: {what})\n"
                    + self.log_tails(dead)
                )
            if ready():
                return
            if time.monotonic() > deadline:
                raise SlurmError(
                    f"not {what} within {START_S:.0f} s\n"
                    + self.run(["sinfo", "--Node", "--long"], check=False).stdout
                    + self.log_tails(logs)
                )
            time.sleep(POLL_S)

    # -- commands and jobs ---------------------------------------------------------------------

    def environ(self) -> dict[str, str]:
        """os.environ for a command against this cluster: SLURM_CONF set, and no variables of
        an enclosing SLURM job."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(_INHERITED)}
        return {**env, **self.env}

    def run(
        self, args: Sequence[str], *, check: bool = True, timeout: float = 60.0, **kwargs
    ) -> subprocess.CompletedProcess[str]:
        """Run a SLURM client command (sbatch, srun, scontrol, ...) against this cluster, its
        output captured as text; `check` raises SlurmError quoting slurmctld's log."""
        result = subprocess.run(
            list(args),
            env=kwargs.pop("env", self.environ()),
            capture_output=True,
            text=True,
            timeout=timeout,
            **kwargs,
        )
        if check and result.returncode != 0:
            raise SlurmError(
                f"{' '.join(args)} exited {result.returncode}\n"
                f"stdout: {result.stdout}\nstderr: {result.stderr}\n"
                + self.log_tails(["slurmctld"])
            )
        return result

    def submit(
        self, script: Path, *args: str, options: Sequence[str] = (), cwd: Path | None = None
    ) -> int:
        """sbatch [options] script [args], run in `cwd` (default: the script's directory, which
        becomes the job's working directory and holds its slurm-<id>.out); the job id."""
        script = Path(script).resolve()
        out = self.run(
            ["sbatch", "--parsable", *options, str(script), *args], cwd=cwd or script.parent
        )
        return int(out.stdout.strip().split(";")[0])  # "<id>" or "<id>;<cluster>"

    def job(self, job_id: int) -> dict[str, str]:
        """The fields of `scontrol show job -o <id>`, e.g. {"JobState": "RUNNING", ...}."""
        line = self.run(["scontrol", "show", "job", "-o", str(job_id)]).stdout.strip()
        # Fields are `Key=value` separated by spaces; a value may hold '=' (TRES=cpu=2,node=2)
        # and, rarely, spaces (Command=/a b), so split only before the next `Key=`.
        fields = re.split(r" (?=[A-Za-z][\w/:]*=)", line)
        return dict(field.split("=", 1) for field in fields if "=" in field)

    def wait(
        self, job_id: int, timeout: float = 120.0, states: Iterable[str] = FINAL_STATES
    ) -> JobResult:
        """Poll the job until its JobState is one of `states` (by default: the job has ended
        and its processes are gone). Raises SlurmError, quoting the logs, after `timeout` s."""
        wanted = frozenset(states)
        deadline = time.monotonic() + timeout
        while True:
            record = self.job(job_id)
            if record.get("JobState") in wanted:
                return self._result(job_id, record)
            if time.monotonic() > deadline:
                result = self._result(job_id, record)
                raise SlurmError(
                    f"job {job_id} still {record.get('JobState')} after {timeout:.0f} s "
                    f"(waiting for {', '.join(sorted(wanted))})\n{result.diagnosis}"
                )
            time.sleep(POLL_S)

    def cancel(self, job_id: int, signal: str | None = None, full: bool = False) -> None:
        """scancel. Measured (slurm 22.05, linuxproc):
        - plain `scancel <id>` cancels the job: SIGTERM to every process of it (the batch
          script, its children, srun and the tasks of every srun step on every node), SIGKILL
          KillWait (30 s) later; the job ends CANCELLED. srun takes its SIGTERM as an order
          to abort its step ("forcing job termination"): its tasks' handlers ran in most
          runs and not in some, so a task cannot count on the time to save;
        - `signal="TERM"` (scancel --signal) only signals the srun steps' tasks; the batch
          script and its other children see nothing and the job goes on (COMPLETED when the
          script then exits 0);
        - `signal="TERM", full=True` (--full) also signals the batch script and its children,
          without cancelling the job. srun, a child of the script, takes its SIGTERM as an
          order to abort its step: the srun tasks were seen SIGKILLed, their SIGTERM handler
          never run. A trainer started by srun is better signalled without --full."""
        args = ["scancel"]
        if signal is not None:
            args.append(f"--signal={signal}")
        if full:
            args.append("--full")
        self.run([*args, str(job_id)])

    def _result(self, job_id: int, record: dict[str, str]) -> JobResult:
        status, _, sig = record.get("ExitCode", "0:0").partition(":")
        node_list = record.get("NodeList", "(null)")
        nodes = []
        if node_list not in ("", "(null)", "None"):
            nodes = self.run(["scontrol", "show", "hostnames", node_list]).stdout.split()
        stdout = Path(record["StdOut"]) if record.get("StdOut") else None
        diagnosis = [f"job {job_id}: " + " ".join(f"{k}={v}" for k, v in record.items())]
        for name in dict.fromkeys(record.get(key) for key in ("StdOut", "StdErr")):
            if name:  # one file when both name it, as by default
                diagnosis.append(_tail(Path(name), "job output"))
        diagnosis.append(self.log_tails(["slurmctld", *(f"slurmd-{n}" for n in nodes)]))
        return JobResult(
            job_id=job_id,
            state=record.get("JobState", "UNKNOWN"),
            exit_code=int(status or 0),
            signal=int(sig or 0),
            nodes=nodes,
            reason=record.get("Reason", ""),
            stdout=stdout,
            record=record,
            diagnosis="\n".join(diagnosis),
        )

    # -- logs ----------------------------------------------------------------------------------

    def log_tails(self, names: Iterable[str], lines: int = 30) -> str:
        """The last lines of each daemon's log (names: munged, slurmctld, slurmd-n1, ...): its
        log file, or its console when the log file is missing or empty."""
        parts = []
        for name in names:
            log = self.log_dir / f"{name}.log"
            if not log.exists() or log.stat().st_size == 0:
                log = self.log_dir / f"{name}.out"
            parts.append(_tail(log, name, lines))
        return "\n".join(parts)

    # -- stop ----------------------------------------------------------------------------------

    def processes(self) -> list[int]:
        """PIDs of every live process of this cluster: the daemons, slurmstepd, job processes
        (all carry this cluster's SLURM_CONF in their environment), and their descendants."""
        marker = f"SLURM_CONF={self.conf}".encode()
        parents: dict[int, int] = {}
        ours = {proc.pid for proc in self._daemons.values() if proc.poll() is None}
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            pid = int(entry.name)
            try:
                status = _status(pid)
                environ = Path(f"/proc/{pid}/environ").read_bytes()
            except OSError:  # gone meanwhile, or a process we may not read
                continue
            if status.get("State", "Z")[0] in "ZX":
                continue
            parents[pid] = int(status.get("PPid", "0"))
            if marker in environ.split(b"\0"):
                ours.add(pid)
        grown = True
        while grown:  # add the descendants of our processes
            grown = False
            for pid, ppid in parents.items():
                if ppid in ours and pid not in ours:
                    ours.add(pid)
                    grown = True
        return sorted(ours)

    def stop(self) -> None:
        """Stop the cluster: cancel its jobs, SIGTERM the slurmds, slurmctld and munged (SIGKILL
        after a grace), kill what is left of the jobs (slurmstepd and its tasks), and check
        that no process of the cluster remains (SlurmError if one does). Safe to call twice."""
        if self._stopped:
            return
        self._stopped = True
        ctld = self._daemons.get("slurmctld")
        if ctld is not None and ctld.poll() is None:
            # Let SLURM end its jobs the way it would (SIGTERM to every job process), rather
            # than orphan them by stopping the slurmds: slurmstepd outlives its slurmd.
            # What does not end in time is killed by the sweep below.
            with contextlib.suppress(SlurmError, subprocess.TimeoutExpired):
                self.cancel_all(timeout=JOBS_END_S)
        # The slurmds first, so none is left without its controller; munged last, as the other
        # daemons talk to it until they exit.
        for names in (
            [n for n in self._daemons if n.startswith("slurmd-")],
            ["slurmctld"],
            ["munged"],
        ):
            procs = [self._daemons[n] for n in names if n in self._daemons]
            for proc in procs:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            for proc in procs:
                try:
                    proc.wait(STOP_S)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(STOP_S)
        # Whatever survived its daemons: slurmstepd, job processes orphaned by their parent.
        for pid in self.processes():
            _kill(pid)
        left = _wait_gone(self.processes, STOP_S)
        if left:
            raise SlurmError(f"processes of the cluster under {self.root} still run: {left}")

    def cancel_all(self, timeout: float = 60.0) -> None:
        """Cancel every job of the cluster and wait until each has ended (SlurmError if one
        has not after `timeout` s: SIGKILL follows SIGTERM only KillWait, 30 s, later)."""
        self.run(["scancel", f"--user={self.user}"])
        deadline = time.monotonic() + timeout
        while True:
            listing = self.run(["squeue", "--noheader", "--states=all", "--format=%i %T"])
            states = dict(line.split() for line in listing.stdout.splitlines() if line.strip())
            running = {job: state for job, state in states.items() if state not in FINAL_STATES}
            if not running:
                return
            if time.monotonic() > deadline:
                raise SlurmError(
                    f"jobs not ended {timeout:.0f} s after scancel: {running}\n"
                    + self.log_tails(["slurmctld", *(f"slurmd-{n}" for n in self.nodes)])
                )
            time.sleep(POLL_S)

    def _stop_quietly(self) -> None:
        with contextlib.suppress(SlurmError):
            self.stop()


def _which(name: str) -> str | None:
    path = os.pathsep.join([os.environ.get("PATH", ""), *SBIN])
    return shutil.which(name, path=path)


def _free_ports(count: int) -> list[int]:
    # All held open until all are picked, so the ports differ from each other.
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("", 0))
            socks.append(sock)
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def _listening(port: int) -> bool:
    """Whether a TCP socket listens on `port`, read from /proc/net (a probe connection would
    leave an error in slurmctld's log)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()  # sl local_address rem_address st ...; st 0A: LISTEN
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    return True
    return False


def _status(pid: int) -> dict[str, str]:
    text = Path(f"/proc/{pid}/status").read_text()
    return dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)


def _alive(pid: int) -> bool:
    """A zombie is no longer running: a daemonised process (slurmstepd's parent is init) stays
    one until init reaps it, which here happens only now and then."""
    try:
        return _status(pid).get("State", "Z")[0] not in "ZX"
    except OSError:
        return False


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _wait_gone(pids, timeout: float) -> list[int]:
    """Poll `pids()` until it lists no live process or `timeout` passes; the PIDs still alive."""
    deadline = time.monotonic() + timeout
    while True:
        left = [pid for pid in pids() if _alive(pid)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(POLL_S)


def _tail(path: Path, title: str, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()[-lines:]
    except OSError as error:
        return f"--- {title}: {error}"
    return f"--- {title} ({path}), last {len(text)} lines:\n" + "\n".join(text)
