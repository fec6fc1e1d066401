// Translation unit of crl_torch_pch, the target that builds the shared precompiled LibTorch header.
// It defines nothing: the target exists so that other targets can REUSE_FROM its header.
