"""A Modbus RTU relay module for the tests (testenv.StartRTUModule):
pymodbus's serial server on a pseudo-terminal, unit UNIT, 16 coils and 16
holding registers from address 0, at BAUD with PARITY (N, E or O).

Usage: python3 rtu_slave.py PORT UNIT BAUD PARITY
It prints "ready" once it listens, and what each write sets ("coil 3 1",
"register 2 256"), so that the test sees the device's side. A line on its
standard input ("coil 3 0", "register 2 7") sets an output as a button
on the board or another master would.
"""
import asyncio
import logging
import sys

from pymodbus.datastore import ModbusSequentialDataBlock, ModbusServerContext, ModbusSlaveContext
from pymodbus.server import StartAsyncSerialServer
from pymodbus.transaction import ModbusRtuFramer


class Block(ModbusSequentialDataBlock):
    """A data block that says what each write sets."""

    def __init__(self, name: str) -> None:
        super().__init__(0, [0] * 16)
        self.name = name

    def setValues(self, address, values):  # noqa: N802 (pymodbus's name)
        super().setValues(address, values)
        for i, v in enumerate(values):
            print(f"{self.name} {address - 1 + i} {int(v)}", flush=True)


async def main() -> None:
    port, unit, baud, parity = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    logging.basicConfig(level=logging.CRITICAL)
    slave = ModbusSlaveContext(co=Block("coil"), hr=Block("register"), di=ModbusSequentialDataBlock(0, [0] * 16),
                               ir=ModbusSequentialDataBlock(0, [0] * 16))
    # single=False: a request for another unit id gets no answer, as on a bus.
    context = ModbusServerContext(slaves={unit: slave}, single=False)
    server = await StartAsyncSerialServer(context=context, framer=ModbusRtuFramer, port=port, baudrate=baud,
                                          parity=parity, stopbits=2 if parity == "N" else 1, bytesize=8,
                                          ignore_missing_slaves=True, defer_start=True)
    await server.start()
    print("ready", flush=True)
    loop = asyncio.get_running_loop()
    codes = {"coil": 5, "register": 6}
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            await asyncio.Event().wait()  # stdin closed: serve until killed
        table, address, value = line.split()
        slave.setValues(codes[table], int(address), [int(value)])


asyncio.run(main())
