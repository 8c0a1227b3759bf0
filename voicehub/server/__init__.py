"""The voicehub server: desk calls over WebSocket, a REST view and a console page.

`create_app(settings)` builds the Starlette app; `serve(settings)` runs it on uvicorn.
"""

from voicehub.server.app import create_app, serve
from voicehub.server.settings import ServerSettings

__all__ = ["ServerSettings", "create_app", "serve"]
