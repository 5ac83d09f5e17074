"""memory.svg / memory.png, the report's picture of the arena plan (report.md links them).

Reporting, not planning: drawn from report.json's "memory_plan" alone (plan/memory_map.py
builds that entry from the Plan), so the picture can only show what the report says.
draw.py lays out the scene (scene.py's primitives, labels.py's numbers); svg.py and png.py
render the same scene."""
from .draw import draw_memory_plan, memory_files, memory_scene  # noqa: F401
