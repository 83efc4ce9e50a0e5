"""The verdict machinery every rule shares, apart from the rules (model/rules/): the verdict a judge
returns and how repeats fold (verdict.py), the figures report.html draws (figures.py), and what a rule
module declares beside its judge, in which words (spec.py)."""
