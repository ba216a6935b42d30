"""The theorem suite: Hypothesis properties named after the paper's results.

Instances come from ``rheo.checks.cases.strategies`` and are capped by the joint draws they imply
(``rheo.checks.cases.profiles.joint_draw_cap``); ``-m extended`` runs the long versions (CI runs
them after the default suite).
"""
