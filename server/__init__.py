"""FixOS served over OpenEnv: typed models, the Environment on live hosts, the app and its client."""

from .client import FixOSEnv
from .models import FixOSAction, FixOSObservation, FixOSState

__all__ = ["FixOSAction", "FixOSEnv", "FixOSObservation", "FixOSState"]
