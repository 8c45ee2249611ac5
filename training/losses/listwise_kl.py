"""Listwise distillation: the student's softmax over a query's candidates copies the teacher's.

KL(p_teacher || p_student) over each query's whole candidate list (RocketQAv2 and the listwise variants of
margin-MSE distil this way). A list carries far more of the teacher's ranking per query than one margin per
mined negative, which is what makes it pay off in the few hundred CPU steps `vela adapt` has: the student learns
*how much* better the teacher finds each candidate than each other one, not only which single one it prefers.
Scores of padding slots (mask False) take no part.
"""

from __future__ import annotations

import torch
from torch import nn


class ListwiseKLLoss(nn.Module):
    def __init__(self, student_temperature: float = 0.05, teacher_temperature: float = 1.0) -> None:
        super().__init__()
        if student_temperature <= 0 or teacher_temperature <= 0:
            raise ValueError("temperatures must be > 0")
        self.student_temperature = student_temperature  # student scores are cosines in [-1, 1]
        self.teacher_temperature = teacher_temperature  # teacher scores are in its own units (z-scores here)

    def forward(self, student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """student (B, C) cosines, teacher (B, C) scores, mask (B, C) True where a candidate is real."""
        fill = torch.finfo(torch.float32).min
        s = (student.float() / self.student_temperature).masked_fill(~mask, fill)  # (B, C)
        t = (teacher.float().to(s.device) / self.teacher_temperature).masked_fill(~mask, fill)  # (B, C)
        p = torch.softmax(t, dim=-1)  # (B, C); 0 on padding
        log_q = torch.log_softmax(s, dim=-1)  # (B, C)
        # sum p log p - sum p log q: zero exactly when the student's list distribution equals the teacher's.
        log_p = torch.log_softmax(t, dim=-1)
        kl = (p * (log_p - log_q)).masked_fill(~mask, 0.0).sum(-1)  # (B,)
        return kl.mean()
