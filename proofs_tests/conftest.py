"""The theorem suite: Hypothesis properties named after the paper's results.

Instances come from ``rheo.checks.cases.strategies`` and are capped by the joint draws they imply
(``rheo.checks.cases.profiles.joint_draw_cap``); ``-m deep`` runs the long versions.
"""
