"""The FastAPI app: OpenEnv's HTTP/WebSocket server around FixOSEnvironment, plus the plain
endpoints the FixOS-style baselines call, one session cap and one idle reaper for both.

    fixos serve --port 8000                     # or: python -m server.app --port 8000

WebSocket sessions (``/ws``, what ``FixOSEnv`` uses) and plain HTTP sessions (``/reset``,
``/step``, ``/state``, ``/close``) are the same kind of session: each has its own
environment, counts against ``max_sessions``, and is closed, containers and all, when it
ends, after ``session_timeout`` seconds without a request (the *idle* timeout: a request
still running is not idle time, and the time between requests is not the episode's: its
``wall_seconds`` counts commands only), or when the server stops.

Timeouts: OpenEnv's generic client waits 60 s for an answer, then drops its socket, which
ends the session and its episode. A step's command is therefore capped at
``step_seconds`` (40 s by default, ``FIXOS_STEP_SECONDS``; 0 = the scenario's own command
timeout, for clients that wait longer, such as ``FixOSEnv`` at 300 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import time
from collections import Counter
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Body, FastAPI, HTTPException, Query, WebSocket
from fastapi.routing import APIRoute, APIWebSocketRoute
from openenv.core.env_server.exceptions import SessionCapacityError
from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.serialization import deserialize_action, serialize_observation
from openenv.core.env_server.types import ConcurrencyConfig
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..core.errors import FixOSError
from ..episodes import tasks as task_levels
from .context import BadRequest, ServerContext, SessionExpired
from .environment import FixOSEnvironment
from .models import FixOSAction, FixOSObservation, FixOSState
from .prepared import MOST_ANNOUNCED

DEFAULT_PORT = 8000
DEFAULT_MAX_SESSIONS = 8
DEFAULT_SESSION_TIMEOUT = 900.0
NEW_SESSION = "new"
PLAIN_PATHS = ("/reset", "/step", "/state", "/health")
PREPARED_COUNTS = ("waiting", "preparing", "ready", "failed")
LOG = logging.getLogger("fixos.server")


class PlainReset(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task_id: str | None = None
    level: int | str | None = None
    """without a task_id: a generated train world of this level (1-5), or "auto" (the curriculum)"""
    task: str | None = None
    """the task level: repair (default), or diagnose, localise, detect (report only, touch nothing)"""
    seed: int | None = None
    episode_id: str | None = None
    session_id: str | None = None
    """this session, "new" for another one, or the default plain session when left out."""


class PlainStep(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: dict[str, Any]
    session_id: str | None = None
    timeout_s: float | None = None


class PlainClose(BaseModel):
    model_config = ConfigDict(extra="forbid")
    session_id: str | None = None


class PlainRow(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task_id: str
    seed: int = 1
    task: str | None = None
    """the row's task level: only repairs are prepared; a report-only row is skipped (reset cold)."""


class PlainPrepare(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rows: list[PlainRow] = Field(max_length=MOST_ANNOUNCED)
    """the rows the trainer will reset next, in order; a row asked for N times is listed N times."""


class FixOSHTTPServer(HTTPEnvServer):
    """OpenEnv's server, whose session table also holds the plain endpoints' sessions."""

    def __init__(self, context: ServerContext, *, max_sessions: int, session_timeout: float) -> None:
        super().__init__(
            functools.partial(FixOSEnvironment, context),
            FixOSAction,
            FixOSObservation,
            concurrency_config=ConcurrencyConfig(
                max_concurrent_envs=max_sessions, session_timeout=session_timeout
            ),
            env_name="fixos",
            state_cls=FixOSState,
        )
        self.context = context
        self.default_session: str | None = None
        self._busy: Counter[str] = Counter()
        """requests running per session: a session at work is never idle, however long its step."""

    async def _run_in_session_executor(self, session_id: str, func: Callable[..., Any], *args, **kwargs):
        # Every request of both kinds (WebSocket and plain) runs here: count it as activity
        # from its start, and hold the reaper off until it ends.
        self._busy[session_id] += 1
        self._update_session_activity(session_id)
        try:
            return await super()._run_in_session_executor(session_id, func, *args, **kwargs)
        finally:
            self._busy[session_id] -= 1
            if not self._busy[session_id]:
                del self._busy[session_id]
            self._update_session_activity(session_id)

    async def _reap_idle_sessions(self) -> None:
        """OpenEnv's reaper, but a session with a request running is not idle, and short
        timeouts are checked often enough to be kept (OpenEnv looks every 5 s at least)."""
        timeout = self._session_idle_timeout_s
        if timeout is None:
            return
        while True:
            await asyncio.sleep(max(timeout / 4, 0.25))
            now = time.time()
            async with self._session_lock:
                stale = [
                    sid
                    for sid, info in self._session_info.items()
                    if sid not in self._busy
                    and sid not in self._session_websocket_attachments
                    and now - info.last_activity_at > timeout
                ]
            for sid in stale:
                info = self._session_info.get(sid)
                if (
                    info is not None
                    and sid not in self._busy
                    and time.time() - info.last_activity_at > timeout
                ):
                    LOG.info("session %s idle for more than %gs: closed with its episode", sid, timeout)
                    with contextlib.suppress(Exception):
                        await self._destroy_session(sid)

    async def plain_session(self, session_id: str | None, *, create: bool) -> tuple[str, FixOSEnvironment]:
        if session_id is None:
            session_id = self.default_session
            if session_id not in self._sessions:
                session_id = NEW_SESSION if create else None
        if session_id == NEW_SESSION and create:
            try:
                session_id, env = await self._create_session()
            except SessionCapacityError as exc:
                raise HTTPException(503, str(exc)) from None
            if self.default_session not in self._sessions:
                self.default_session = session_id
            return session_id, env  # type: ignore[return-value]
        env = self._sessions.get(session_id) if session_id else None
        if session_id is None or env is None:
            raise HTTPException(
                404, f"no session {session_id!r} (it ended or timed out); POST /reset opens one"
            )
        return session_id, env  # type: ignore[return-value]

    async def run_in(self, session_id: str, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            result = await self._run_in_session_executor(session_id, func, *args, **kwargs)
        except SessionExpired as exc:
            raise HTTPException(404, str(exc)) from None
        except BadRequest as exc:
            raise HTTPException(400, str(exc)) from None
        except FixOSError as exc:  # the harness could not give a valid episode (boot, inject, shell)
            raise HTTPException(503, f"{type(exc).__name__}: {exc}") from None
        self._update_session_activity(session_id, increment_step=func.__name__ == "step")
        return result

    async def close_all(self) -> None:
        for session_id in list(self._sessions):
            await self._destroy_session(session_id)
        await asyncio.get_running_loop().run_in_executor(None, self.context.close_all)


def _quiet_when_the_client_left(app: FastAPI) -> None:
    """OpenEnv's /ws handler answers a step even when the client has gone (its message timeout
    ran out mid-step): the send fails, its error reply fails again, and ASGI prints tracebacks.
    The session and its episode are already closed by then; say so in one line instead."""
    route = next(r for r in app.router.routes if isinstance(r, APIWebSocketRoute) and r.path == "/ws")
    handler = route.endpoint
    app.router.routes.remove(route)

    async def ws(websocket: WebSocket) -> None:
        try:
            await handler(websocket)
        except Exception as exc:  # a send on a closed socket: nobody is left to tell
            LOG.warning("a WebSocket client left mid-request (%s); its session ended", type(exc).__name__)

    app.add_api_websocket_route("/ws", ws)


def create_fixos_app(
    context: ServerContext | None = None,
    *,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    session_timeout: float = DEFAULT_SESSION_TIMEOUT,
    step_seconds: float | None = None,
) -> FastAPI:
    """``session_timeout``: the idle timeout; ``step_seconds``: the cap on a step's command
    (None: the context's, itself FIXOS_STEP_SECONDS or 40 s)."""
    context = context or ServerContext()
    if step_seconds is not None:
        context.step_seconds = step_seconds
    server = FixOSHTTPServer(context, max_sessions=max_sessions, session_timeout=session_timeout)
    app = FastAPI(
        title="FixOS over OpenEnv",
        version="0.1.0",
        description="Repair real, broken nginx + MariaDB servers: each session is a live container.",
    )
    server.register_routes(app)
    _quiet_when_the_client_left(app)
    # OpenEnv's own /reset, /step and /state make a throwaway environment per request;
    # FixOS's keep a session, so they replace them.
    app.router.routes = [
        r for r in app.router.routes if not (isinstance(r, APIRoute) and r.path in PLAIN_PATHS)
    ]
    app.state.fixos = server
    app.router.on_shutdown.append(server.close_all)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {
            "status": "healthy",
            "active_sessions": server.active_sessions,
            "max_sessions": server.max_concurrent_envs,
        }

    @app.get("/tasks")
    async def tasks() -> list[dict[str, Any]]:
        return [
            {
                "id": s.id,
                "title": s.title,
                "difficulty": s.difficulty,
                "instruction": s.instruction,
                "max_steps": s.limits.max_steps,
            }
            for s in context.catalog.values()
        ]

    def prepared_status() -> dict[str, Any]:
        prepared = context.prepared
        counts = prepared.status() if prepared is not None else dict.fromkeys(PREPARED_COUNTS, 0)
        return {"ahead": context.prepare_ahead, **counts}

    @app.get("/prepare")
    async def prepare_status() -> dict[str, Any]:
        """The episodes prepared ahead: rows waiting, being prepared, ready, failed."""
        return prepared_status()

    @app.post("/prepare")
    async def prepare(request: PlainPrepare) -> dict[str, Any]:
        """Announce the next rows: the server resets them ahead of time (``prepared.py``), and a
        reset of such a row without an ``episode_id`` takes one ready. Report-only rows are
        skipped: a prepared episode is a repair, which such a reset would not take."""
        try:
            levels = [task_levels.task_level(row.task or task_levels.REPAIR) for row in request.rows]
        except FixOSError as exc:
            raise HTTPException(400, f"task: {exc}") from None
        repairs = [r for r, level in zip(request.rows, levels, strict=True) if level == task_levels.REPAIR]
        try:
            for row in request.rows:  # every row names a task, the skipped ones too
                context.scenario(row.task_id)
            context.announce([(row.task_id, row.seed) for row in repairs])
        except BadRequest as exc:
            raise HTTPException(400, str(exc)) from None
        return {**prepared_status(), "skipped": len(request.rows) - len(repairs)}

    @app.post("/reset")
    async def reset(request: Annotated[PlainReset, Body(default_factory=PlainReset)]) -> dict[str, Any]:
        fresh = request.session_id == NEW_SESSION or (
            request.session_id is None and server.default_session not in server._sessions
        )
        session_id, env = await server.plain_session(request.session_id, create=True)
        kwargs = request.model_dump(exclude={"session_id"}, exclude_none=True)
        try:
            observation = await server.run_in(session_id, env.reset, **kwargs)
        except Exception:
            if fresh:  # a session that never held an episode is not kept
                await server._destroy_session(session_id)
            raise
        return {"session_id": session_id, **serialize_observation(observation)}

    @app.post("/step")
    async def step(request: PlainStep) -> dict[str, Any]:
        session_id, env = await server.plain_session(request.session_id, create=False)
        try:
            action = deserialize_action(request.action, FixOSAction)
        except ValidationError as exc:
            raise HTTPException(422, exc.errors(include_url=False)) from None
        observation = await server.run_in(session_id, env.step, action, timeout_s=request.timeout_s)
        return {"session_id": session_id, **serialize_observation(observation)}

    @app.get("/state")
    async def state(session_id: Annotated[str | None, Query()] = None) -> dict[str, Any]:
        session_id, env = await server.plain_session(session_id, create=False)
        return {"session_id": session_id, **env.state.model_dump()}

    @app.post("/close")
    async def close(request: Annotated[PlainClose, Body(default_factory=PlainClose)]) -> dict[str, Any]:
        session_id, _ = await server.plain_session(request.session_id, create=False)
        await server._destroy_session(session_id)
        return {"session_id": session_id, "closed": True}

    return app


def serve(
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    session_timeout: float = DEFAULT_SESSION_TIMEOUT,
    step_seconds: float | None = None,
    context: ServerContext | None = None,
) -> None:
    """Run the server until Ctrl-C or SIGTERM; every session's containers are removed on the way out."""
    import uvicorn

    _allow_open_files()
    context = context or ServerContext()
    app = create_fixos_app(
        context, max_sessions=max_sessions, session_timeout=session_timeout, step_seconds=step_seconds
    )
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=5)
    try:
        uvicorn.Server(config).run()
    finally:
        context.close_all()


def _allow_open_files(wanted: int = 65536) -> None:
    """Raise this process's soft limit on open files toward the hard one: each session holds
    several sockets (shells, probe, engine), and the common soft default of 1024 runs out
    below 64 sessions with episodes prepared ahead."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def _settings() -> tuple[int, float]:
    return (
        int(os.environ.get("FIXOS_MAX_SESSIONS", DEFAULT_MAX_SESSIONS)),
        float(os.environ.get("FIXOS_SESSION_TIMEOUT", DEFAULT_SESSION_TIMEOUT)),
    )


# For `uvicorn server.app:app` and openenv.yaml; no engine is touched until a reset.
app = create_fixos_app(max_sessions=_settings()[0], session_timeout=_settings()[1])


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description="Serve FixOS over OpenEnv on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--max-sessions", type=int, default=_settings()[0])
    parser.add_argument(
        "--session-timeout", type=float, default=_settings()[1], help="idle seconds before a session closes"
    )
    parser.add_argument(
        "--step-seconds",
        type=float,
        default=None,
        help="cap on a step's command (default FIXOS_STEP_SECONDS or 40; 0: the scenario's own)",
    )
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        serve(
            port=args.port,
            max_sessions=args.max_sessions,
            session_timeout=args.session_timeout,
            step_seconds=args.step_seconds,
        )


if __name__ == "__main__":
    main()
