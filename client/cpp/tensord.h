// The tensord C++ client: include this one header.
//   client.h       Client::Connect, devices, ops, health, sessions
//   session.h      Session (put/get, eager ops, batches, autodiff contexts), Batch, Gradients
//   tensor.h       Tensor (RAII handle), Operand, Attrs
//   ops.h          named eager ops and operators on StatusOr<Tensor>
//   optim.h        Sgd, Adam, AdamW: optimizer steps run on the server
//   program.h      ProgramBuilder, Program: a step compiled once, run in one round trip
//   host_tensor.h  HostTensor (client-side values, .npy)
//   status.h       ReasonOf / ReasonNameOf / MetadataOf on failed statuses
#pragma once

#include "client/cpp/client.h"
#include "client/cpp/host_tensor.h"
#include "client/cpp/ops.h"
#include "client/cpp/optim.h"
#include "client/cpp/program.h"
#include "client/cpp/session.h"
#include "client/cpp/shared_memory.h"
#include "client/cpp/status.h"
#include "client/cpp/tensor.h"
