"""The FastAPI application: routers per resource, settings injected."""

from fastapi import FastAPI

from app import openapi, responses
from app.delivery import Compression, Static
from app.head import HeadAsGet
from app.routers import calculator, deck, embed, estimate, health, runs, simulations
from app.settings import Settings, get_settings
from app.simulator import lifespan
from simulations.runtime import RankPool


def create_app(settings: Settings | None = None, pool: RankPool | None = None) -> FastAPI:
    """The app. `pool`: an already running rank pool to use (and not close), as tests share one."""
    settings = settings or get_settings()
    app = FastAPI(title="distdeck", version="0.1.0", lifespan=lifespan)
    app.state.settings = settings
    app.state.pool = pool
    responses.install(app, settings)
    # Inside HeadAsGet: a HEAD gets the GET's Content-Encoding and compressed Content-Length.
    app.add_middleware(Compression)
    app.add_middleware(HeadAsGet)  # HEAD wherever GET: see app/head.py
    openapi.install(app)
    app.include_router(health.router)
    app.include_router(deck.router)
    app.include_router(simulations.router)
    app.include_router(calculator.router)
    app.include_router(estimate.router)
    app.include_router(embed.router)
    app.include_router(runs.router)
    # StaticFiles resolves each path and refuses anything outside static_dir (no traversal); Static adds
    # Cache-Control by fingerprint (app/delivery.py).
    app.mount("/static", Static(directory=settings.static_dir), name="static")
    return app
