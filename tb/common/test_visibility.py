"""tb.common.visibility: the regression's models make every register, memory and port
public and no other net (pure Python; checks the marking on hand-written Yosys-style Verilog
and on a generated design)."""
import re

from scripts.verilog import generate
from tb.common.visibility import expose_state

PUBLIC = "/*verilator public_flat_rw*/"

SAMPLE = r"""module top(clk, i, o);
  reg \$auto$verilog_backend.cc:2355:dump_module$1  = 0;
  input clk;
  wire clk;
  input [3:0] i;
  output [4:0] \release ;
  reg [4:0] \release  = 5'h00;
  reg [7:0] next;
  wire [7:0] sum;
  reg [127:0] mem [255:0];
  reg [7:0] state = 8'h00;
  always @*
    next = sum;
  always @(posedge clk)
    state <= next;
  always @(posedge clk)
    \release  <= i;
  always @(posedge clk) begin
    if (i[0])
      mem[i] <= sum;
  end
endmodule
"""


def _marked(text):
    return {line.strip() for line in text.splitlines() if PUBLIC in line}


def test_registers_memories_and_ports_only():
    text, count = expose_state(SAMPLE)
    assert _marked(text) == {
        f"input clk {PUBLIC};", f"input [3:0] i {PUBLIC};", rf"output [4:0] \release  {PUBLIC};",
        rf"reg [4:0] \release  {PUBLIC} = 5'h00;", f"reg [127:0] mem [255:0] {PUBLIC};",
        f"reg [7:0] state {PUBLIC} = 8'h00;",
    }
    assert count == 6
    # the comb `reg` (always @*), the wire and Yosys's dump_module flag stay private
    for private in ("reg [7:0] next;", "wire [7:0] sum;", "dump_module$1  = 0;"):
        assert any(line.strip().endswith(private) and PUBLIC not in line
                   for line in text.splitlines()), private
    assert text.count("\n") == SAMPLE.count("\n"), "line numbers must stay those of the source"


def test_every_flip_flop_of_a_design_is_marked():
    # the AES core: its stage registers hold the round keys the reset-scrub scan looks for
    source = generate("aes256", {}).read_text()
    text, _ = expose_state(source)
    written = set()
    for line in text.splitlines():
        if m := re.match(r"^\s+(\\\S+ |[A-Za-z_][\w$]*)\s*(?:\[[^\]]*\])?\s*<=", line):
            written.add(m.group(1).strip())
    assert len(written) > 20
    declared = {}
    for line in text.splitlines():
        if m := re.match(r"^\s+reg\s+(?:\[[^\]]*\]\s+)?(\\\S+ |[A-Za-z_][\w$]*)", line):
            declared.setdefault(m.group(1).strip(), []).append(PUBLIC in line)
    unmarked = [name for name in written if not all(declared.get(name, [False]))]
    assert not unmarked, f"registers left private: {unmarked[:5]}"
