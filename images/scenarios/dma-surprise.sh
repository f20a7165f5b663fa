# dma-surprise: the receive stream runs (as in dma-unbind), then the surprise
# scenario: the device vanishes mid-stream (all-ones from then on), the stream
# and the worker stop by themselves, and the host removes the device. No DMA
# after.
check stream_offered device_sync '{"cmd":"set_knobs","stream":true}'
STREAM=1
. /scenarios/surprise.sh
