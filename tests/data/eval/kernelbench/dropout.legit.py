# Legitimate (level2/066_matmul_dropout_softmax): KernelBench's module as it is, with nn.Dropout(0.2).
# crl's reference treats dropout as the identity, so crl runs a candidate's dropout layers as at
# inference (the module itself stays in training mode).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, dropout_p):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, x):
        return torch.softmax(self.dropout(self.matmul(x)), dim=1)
