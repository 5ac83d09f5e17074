from .arena import Placement, Plan, plan_memory  # noqa: F401
from .proof import prove_plan  # noqa: F401
