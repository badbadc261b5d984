# An hpccm recipe comparable to the Dockerfile gpustack generates for
# fixtures/specs/h100-ib-train-serve.toml (fixtures/gen/h100-ib-train-serve/docker/Dockerfile):
# a devel stage that builds the InfiniBand fabric stack (gdrcopy, UCX, Open MPI) from source,
# then a runtime stage with NCCL, the fabric copied in, and the Python layers installed with pip.
# `cargo bench --bench budgets` times `hpccm --recipe benches/hpccm/recipe.py --format docker`
# side by side with `gpustack lock` + `gpustack gen all` (book/src/performance.md).
# pylint: disable=undefined-variable

devel = 'nvidia/cuda:12.9.1-devel-ubuntu22.04'
runtime = 'nvidia/cuda:12.9.1-runtime-ubuntu22.04'

Stage0 += baseimage(image=devel, _as='fabric')
Stage0 += packages(ospackages=['autoconf', 'automake', 'libtool', 'make', 'cmake',
                               'ninja-build', 'pkg-config', 'python3', 'libnl-3-dev',
                               'libnl-route-3-dev', 'libudev-dev', 'ca-certificates', 'curl',
                               'bzip2', 'xz-utils', 'file', 'libibverbs-dev',
                               'librdmacm-dev'])
Stage0 += gdrcopy(version='2.5.1', prefix='/opt/fabric')
Stage0 += ucx(version='1.22.0', prefix='/opt/fabric', cuda=True, gdrcopy='/opt/fabric',
              ofed=True, enable_mt=True, disable_assertions=True)
Stage0 += openmpi(version='5.0.9', prefix='/opt/fabric', cuda=True, ucx='/opt/fabric',
                  infiniband=True)

Stage1 += baseimage(image=runtime, _as='base')
Stage1 += nccl(version='2.27.5-1', cuda='12.9', build=False)
Stage1 += packages(ospackages=['libnl-3-200', 'libnl-route-3-200', 'libudev1',
                               'openssh-client', 'ibverbs-providers', 'libibverbs1',
                               'librdmacm1', 'ca-certificates'])
Stage1 += Stage0.runtime(_from='fabric')
Stage1 += environment(variables={'NCCL_IB_DISABLE': '0'})
Stage1 += python(python3=True, python2=False, devel=False)
Stage1 += pip(pip='pip3', packages=['torch==2.10.0+cu128', 'vllm==0.19.1',
                                    'deepspeed==0.19.8'],
              args=['--index-url https://download.pytorch.org/whl/cu128'])
Stage1 += label(metadata={'org.opencontainers.image.title': 'llm-cluster'})
