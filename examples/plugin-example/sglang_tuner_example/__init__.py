"""Hook implementations only: this package registers one technique."""

from service import hookimpl

from sglang_tuner_example.technique import CudaGraphBatchTechnique


@hookimpl
def register_techniques(register):
    register(CudaGraphBatchTechnique())
