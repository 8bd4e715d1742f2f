"""From raw command-line inputs to a validated :class:`Planned` backfill."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from engine.base.errors import BadInput, Refused
from engine.dates.instants import boundary_instant, load_zone, parse_boundary
from engine.dates.plan import parse_unit
from engine.pipeline.options import RunOptions
from engine.pipeline.repository import Target, pipeline_file, resolve_target
from engine.pipeline.yamlfile import read_yaml
from engine.spec.backfill_spec import BackfillSpec, ExecutionOptions, Planned, TargetSpec, check_execution_options
from engine.spec.command_template import check_placeholders
from engine.spec.parallelism import Parallelism, effective_parallelism


def pipeline_display_name(target: Target) -> str:
    """The pipeline's ``name`` (or its directory name), plus the asset file for asset targets."""
    data = read_yaml(pipeline_file(target.pipeline_dir))  # type: ignore[arg-type]
    name = data.get("name") if isinstance(data, dict) else None
    name = name if isinstance(name, str) and name else target.pipeline_dir.name
    return f"{name}/{target.path.name}" if target.is_asset else name


def check_environment_allowed(environment: str | None, force: bool) -> None:
    """Environments named like production need ``--force``."""
    if environment and "prod" in environment.lower() and not force:
        raise Refused(f"environment {environment!r} looks like production: pass --force to backfill it")


def plan_request(
    *,
    target: str | None,
    command: str | None,
    name: str | None,
    start: str | None,
    end: str | None,
    timezone: str,
    partition: str,
    environment: str | None,
    config_file: str | None,
    run_options: RunOptions,
    options: ExecutionOptions,
    force: bool,
    cwd: Path | None = None,
) -> Planned:
    """Validate raw inputs into a spec, resolve the environment and the effective parallelism."""
    for flag, value in (("--name", name), ("--environment", environment), ("--config-file", config_file)):
        if value is not None and not value.strip():
            raise BadInput(f"{flag} '' is empty: give a value, or leave the option out for the default")
    if bool(target) == bool(command):
        raise BadInput(
            "give either a TARGET (pipeline directory or asset file) or --command 'TEMPLATE', not "
            + ("both" if target else "neither")
        )
    if start is None or end is None:
        missing = "--start-date" if start is None else "--end-date"
        raise BadInput(f"{missing} is required: give a date such as 2024-01-01 or a timestamp")
    zone = load_zone(timezone)
    unit = parse_unit(partition)
    start_boundary = parse_boundary(start, "--start-date")
    end_boundary = parse_boundary(end, "--end-date")
    start_at = boundary_instant(start_boundary, zone, "--start-date", inclusive_date=False)
    end_at = boundary_instant(end_boundary, zone, "--end-date", inclusive_date=True)
    check_execution_options(options)
    base = cwd or Path.cwd()
    if command is not None:
        if not command.strip():
            raise BadInput("--command '' is empty: give a program and its arguments, e.g. --command 'echo {start}'")
        check_placeholders(command)
        check_program(command, base)
        run_options = RunOptions()  # pipeline run options (BRUIN_VARS included) mean nothing to a command
        target_spec = TargetSpec(
            "command", name or command, template=command, identity={"kind": "command", "template": command}
        )
        spec = BackfillSpec(target_spec, environment, start_at, end_at, zone, unit, run_options)
        _ = spec.plan
        return Planned(spec, options, Parallelism(options.max_parallel, options.max_parallel, None))
    assert target is not None
    from engine.pipeline.config import find_config_file, load_config  # a pipeline's: not a command's start-up

    resolved = resolve_target(target, cwd=base)
    config_path = find_config_file(resolved, config_file, cwd=base)
    config = load_config(config_path)
    env = config.environment(environment)
    check_environment_allowed(env.name, force)
    run_options = replace(run_options, config_file=str(config_path))
    from engine.pipeline.validation import check_pipeline  # a command backfill never pays for the pipeline code

    checked = check_pipeline(resolved, config, env, run_options)  # once: the pre-flight judges this same result
    target_spec = TargetSpec(
        "asset" if resolved.is_asset else "pipeline",
        name or pipeline_display_name(resolved),
        path=str(resolved.path),
        identity=resolved.identity(),
    )
    spec = BackfillSpec(target_spec, env.name, start_at, end_at, zone, unit, run_options)
    _ = spec.plan
    parallelism = effective_parallelism(options.max_parallel, options.workers, env)
    return Planned(spec, options, parallelism, config, env, checked)


def check_program(template: str, cwd: Path) -> None:
    """The command's program must exist and be executable now, or every partition would fail to start."""
    import os
    import shlex
    import shutil

    try:
        program = shlex.split(template)[0] if template.strip() else ""
    except ValueError:
        return  # unbalanced quotes are reported with the template's other errors
    if not program or "{" in program:
        return  # a program chosen per partition cannot be checked before it is substituted
    if "/" in program:
        path = Path(program) if Path(program).is_absolute() else cwd / program
        if not path.is_file():
            raise BadInput(f"--command program {program!r} does not exist (looked for {path})")
        if not os.access(path, os.X_OK):
            raise BadInput(
                f"--command program {program!r} is not executable: chmod +x it or run it through its interpreter"
            )
        return
    if shutil.which(program) is None:
        raise BadInput(f"--command program {program!r} is not on PATH: give its path, or check the spelling and PATH")
