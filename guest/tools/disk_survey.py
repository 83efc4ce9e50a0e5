"""A disk under test found and read in one guest command: its name (by serial or WWN), its limits,
its kept settings (what the rules set back) and its facts (drivers, versions, boot settings), the four
scripts the sysfs and facts tools run one at a time, joined: one SSH round trip where there were four,
for every disk a session sets up.

Where the kernel's own files do not name the disk (a kernel that shows the serial only through udev),
the survey says so and the disk is found and read as before, a command each (``measure.disk``).

    survey = tools.get(DiskSurvey).survey("vioc-dut0")
    survey.name, survey.limits, survey.kept, survey.facts   # "sdb", GuestLimits, {setting: value}, DiskFacts
"""

from __future__ import annotations

from dataclasses import dataclass

from guest.tools.facts import GuestFacts
from guest.tools.sysfs import LIMITS_SCRIPT, find_script, parse_settings, settings_script, valid_disk
from guest.tools.tool import GuestTool
from model.device_limits import GuestLimits, parse_guest_limits
from model.errors import ParseError
from model.parse.guestfacts import DiskFacts

#: The shell variable the survey keeps the found disk's name in, for the limits and facts scripts.
DISK_VAR = "$vioc_disk"
FOUND = "@@ vioconform-found"
LIMITS = "@@ vioconform-limits"
KEPT = "@@ vioconform-kept"

#: ``{find}`` prints the disks that carry the serial; only where exactly one does, its limits, kept
#: settings and facts follow, each after its marker line (the facts script prints its own ``@@`` sections).
SURVEY_SCRIPT = """vioc_found=$({find})
echo '{found}'
[ -n "$vioc_found" ] && echo "$vioc_found"
set -- $vioc_found
if [ $# -eq 1 ]; then
vioc_disk=$1
echo '{limits_marker}'
{limits}
echo '{kept_marker}'
{kept}
{facts}
fi
true
"""


@dataclass(frozen=True)
class Survey:
    """What one survey found: the names of the disks with the serial, and where exactly one had it,
    its limits (or the ParseError they gave), its kept settings (``Sysfs.settings``) and its facts (or
    the ParseError they gave)."""

    names: tuple[str, ...]
    limits: GuestLimits | ParseError | None = None
    facts: DiskFacts | ParseError | None = None
    kept: dict[str, str] | None = None

    @property
    def name(self) -> str | None:
        return self.names[0] if len(self.names) == 1 else None


class DiskSurvey(GuestTool):
    """The disk's name, limits and facts in one guest command (``survey``)."""

    name = "disk survey"

    def script(self, ident: str) -> str:
        facts = self.tools.get(GuestFacts).disk_script(DISK_VAR)
        return SURVEY_SCRIPT.format(find=find_script(ident), found=FOUND, limits_marker=LIMITS,
                                    limits=LIMITS_SCRIPT.replace("{disk}", DISK_VAR), kept_marker=KEPT,
                                    kept=settings_script(DISK_VAR), facts=facts)

    def survey(self, ident: str) -> Survey:
        """The disks whose serial (or WWN) is ``ident`` in the kernel's own files (``Sysfs.find_disk``'s
        first look) and, where it is one disk, its limits, kept settings and facts as ``Sysfs.limits``,
        ``Sysfs.settings`` and ``GuestFacts.disk`` read them."""
        return self.parse(self._run(self.script(ident), timeout_s=60).stdout)

    def parse(self, output: str) -> Survey:
        head, _, rest = output.partition(f"{FOUND}\n")
        found, _, read = rest.partition(f"{LIMITS}\n")
        names = tuple(found.split())
        if head.strip() or len(names) != 1:
            return Survey(names)
        name = valid_disk(names[0])
        limits_text, _, rest = read.partition(f"{KEPT}\n")
        kept_text, mark, facts_text = rest.partition("@@ ")
        limits: GuestLimits | ParseError
        facts: DiskFacts | ParseError
        try:
            limits = parse_guest_limits(limits_text)
        except ParseError as e:
            limits = e
        try:
            facts = self.tools.get(GuestFacts).disk_from(mark + facts_text, name)
        except ParseError as e:
            facts = e
        return Survey(names, limits, facts, parse_settings(kept_text))

