from .arena import Placement, Plan, plan_memory, scratch_by_step  # noqa: F401
from .proof import prove_plan  # noqa: F401
