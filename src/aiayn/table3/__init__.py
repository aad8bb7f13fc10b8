"""The paper's Table 3 (variations on the base model) as one command: `aiayn table3`.

rows.py holds the rows (data) and the scales they run at, runs.py trains and scores them
(resumable, mergeable), table.py sets our numbers beside the paper's; the figure is
aiayn.viz.table3.
"""
