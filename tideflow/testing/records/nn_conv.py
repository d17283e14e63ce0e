from ..opinfo import OpInfo

RECORDS: list[OpInfo] = []
