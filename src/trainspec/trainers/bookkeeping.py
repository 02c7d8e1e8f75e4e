"""What both training loops do around each step besides learning: metrics (monitor, progress),
heartbeat, garbage collection, profiling, and the operator's commands (control).

    books = Bookkeeping.build(config, run_dir, run_name, document, world, start_step)
    ...each step...
    books.record(step, metrics)
    asked = books.commands(step)                    # the same answer on every rank
    if books.should_save(step, checkpointer, asked): save(step)
    if asked.stop: break
    books.close()
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .control import Commands, Control
from .heartbeat import Heartbeat
from .housekeeping import GarbageCollector, Profiler
from .monitor import Monitor
from .progress import Progress
from .world import World, any_rank


@dataclass
class Bookkeeping:
    world: World
    control: Control
    monitor: Monitor
    progress: Progress
    heartbeat: Heartbeat
    collector: GarbageCollector
    profiler: Profiler

    @classmethod
    def build(cls, config, run_dir: Path, run_name: str, document: dict, world: World, start: int):
        """Each piece from its own sub-config; call `start()` once setup is done."""
        return cls(
            world=world,
            control=Control(config.control, run_dir / "control", read_files=world.is_main),
            monitor=Monitor(config.monitors, run_dir, run_name, document, enabled=world.is_main),
            progress=Progress(config.max_steps, start, config.log, enabled=world.is_main),
            heartbeat=Heartbeat(config.heartbeat),
            collector=GarbageCollector(config.gc),
            profiler=Profiler(config.trace_path, config.memory_profiler_path, world.device.type),
        )

    def start(self) -> None:
        """Signal handlers on; the setup's objects frozen out of the garbage collector."""
        self.control.install()
        self.collector.freeze_setup()

    def record(self, step: int, metrics: dict) -> None:
        self.monitor.log(step, metrics)
        self.progress.update(step, metrics)
        self.heartbeat.beat(step)
        self.collector.step(step)
        self.profiler.step()

    def commands(self, step: int) -> Commands:
        """The operator's requests at this step boundary; one rank asking is every rank asking."""
        asked = self.control.poll(step)
        return Commands(
            checkpoint=any_rank(asked.checkpoint, self.world),
            stop=any_rank(asked.stop, self.world),
        )

    def should_save(self, step: int, checkpointer, asked: Commands) -> bool:
        on_stop = asked.stop and self.control.checkpoint_on_stop
        return checkpointer.due(step) or asked.checkpoint or on_stop

    def close(self) -> None:
        self.control.close()
        self.progress.close()
        self.profiler.close()
        self.collector.close()
        self.heartbeat.close()
        self.monitor.close()


def closing_line(
    run_dir: Path, step: int, checkpoint: Path | None, plot: Path | None, report: str | None = None
) -> str:
    parts = [f"done after step {step}: run {run_dir}"]
    parts.append(f"checkpoint {checkpoint}" if checkpoint else "no checkpoint ([ckpt] is off)")
    if plot:
        parts.append(f"plot {plot}")
    if report:
        parts.append(report)
    return "; ".join(parts)
