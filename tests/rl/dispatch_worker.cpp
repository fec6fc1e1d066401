// The dispatch protocol over real MPI ranks, started by dispatch_test under mpirun -np 3:
//   dispatch_worker OUT.json
// Rank 0 dispatches 13 programs of 3 tasks; ranks 1 and 2 "evaluate" them (a verdict whose
// message is the program text; the first ReLU program sleeps 1.5 s, the others 20 ms). Rank 0
// writes, per work id, the evaluator rank and verdict message, to OUT.json.
#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>
#include <iostream>
#include <thread>

#include "core/error.h"
#include "dist/group.h"
#include "dist/mpi_roles.h"
#include "rl/dispatch.h"

int main(int argc, char** argv) {
  try {
    crl::dist::MpiSession mpi(&argc, &argv);
    if (argc != 2) throw std::runtime_error("usage: dispatch_worker OUT.json");
    if (mpi.rank() == 0) {
      std::vector<crl::rl::WorkItem> items;
      const char* tasks[] = {"relu", "tanh", "sigmoid"};
      for (int i = 0; i < 13; ++i) {
        items.push_back({100 + i, tasks[i % 3], i == 0 ? "slow" : "fast " + std::to_string(i), "item " + std::to_string(i)});
      }
      crl::rl::ProgramDispatcher dispatcher(crl::dist::Group::world(), 1);
      const auto verdicts = dispatcher.evaluate(items);
      dispatcher.stop_all();
      nlohmann::json out = nlohmann::json::object();
      for (const auto& [id, v] : verdicts) {
        out[std::to_string(id)] = {{"rank", v.evaluator_rank}, {"message", v.verdict.message}, {"task", v.verdict.task_id}, {"status", v.verdict.status_text()}};
      }
      std::ofstream(argv[1]) << out.dump(1);
    } else {
      crl::rl::evaluator_loop(crl::dist::Group::world(), [](const crl::rl::WorkItem& w) {
        std::this_thread::sleep_for(std::chrono::milliseconds(w.program == "slow" ? 1500 : 20));
        crl::eval::Verdict v;
        v.task_id = w.task;
        v.candidate = w.name;
        v.status = crl::eval::VerdictStatus::kOk;
        v.message = w.program;
        if (w.program == "fast 4") throw crl::Error("a judge of crl's own broke");  // becomes internal_error
        return v;
      });
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "dispatch_worker: " << e.what() << "\n";
    return 1;
  }
}
