"""The schemas of torchvision 0.28's C++ operators, defined without kernels (see
sitecustomize.py): enough for `import torchvision`; calling one of them fails loudly."""

import torch

SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "box_iou_rotated(Tensor boxes1, Tensor boxes2) -> Tensor",
    "roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height,"
    " SymInt pooled_width, int sampling_ratio, bool aligned) -> Tensor",
    "_roi_align_backward(Tensor grad, Tensor rois, float spatial_scale, SymInt pooled_height,"
    " SymInt pooled_width, SymInt batch_size, SymInt channels, SymInt height, SymInt width,"
    " int sampling_ratio, bool aligned) -> Tensor",
    "qroi_align(Tensor input, Tensor rois, float input_scale, int input_zero_point,"
    " float rois_scale, int rois_zero_point, float spatial_scale, SymInt pooled_height,"
    " SymInt pooled_width, int sampling_ratio, bool aligned) -> Tensor",
    "ps_roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height,"
    " SymInt pooled_width, int sampling_ratio) -> (Tensor, Tensor)",
    "_ps_roi_align_backward(Tensor grad, Tensor rois, Tensor channel_mapping,"
    " float spatial_scale, SymInt pooled_height, SymInt pooled_width, int sampling_ratio,"
    " SymInt batch_size, SymInt channels, SymInt height, SymInt width) -> Tensor",
    "roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height,"
    " SymInt pooled_width) -> (Tensor, Tensor)",
    "_roi_pool_backward(Tensor grad, Tensor rois, Tensor argmax, float spatial_scale,"
    " SymInt pooled_height, SymInt pooled_width, SymInt batch_size, SymInt channels,"
    " SymInt height, SymInt width) -> Tensor",
    "ps_roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height,"
    " SymInt pooled_width) -> (Tensor, Tensor)",
    "_ps_roi_pool_backward(Tensor grad, Tensor rois, Tensor channel_mapping,"
    " float spatial_scale, SymInt pooled_height, SymInt pooled_width, SymInt batch_size,"
    " SymInt channels, SymInt height, SymInt width) -> Tensor",
    "deform_conv2d(Tensor input, Tensor weight, Tensor offset, Tensor mask, Tensor bias,"
    " SymInt stride_h, SymInt stride_w, SymInt pad_h, SymInt pad_w, SymInt dilation_h,"
    " SymInt dilation_w, SymInt groups, SymInt offset_groups, bool use_mask) -> Tensor",
    "_deform_conv2d_backward(Tensor grad, Tensor input, Tensor weight, Tensor offset,"
    " Tensor mask, Tensor bias, SymInt stride_h, SymInt stride_w, SymInt pad_h, SymInt pad_w,"
    " SymInt dilation_h, SymInt dilation_w, SymInt groups, SymInt offset_groups,"
    " bool use_mask) -> (Tensor, Tensor, Tensor, Tensor, Tensor)",
)

LIBRARY = torch.library.Library("torchvision", "DEF")
for schema in SCHEMAS:
    LIBRARY.define(schema)
